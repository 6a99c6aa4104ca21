"""`pnd retrieve`: rank captions for videos (and videos for captions) with prior-normalized scores.

    pnd retrieve videos/ --captions captions.jsonl --model llava-hf/llava-onevision-qwen2-7b-ov-hf \
        --alpha 0.9 --out results/ [--first-stage sims.npy --top-k 10 --fuse 0.0] [--plot]

Captions: a UTF-8 .txt file (one per line; with --aligned the i-th caption belongs to the i-th video) or a
.jsonl file of {"caption": ..., "video": path} (the "video" field gives the ground truth). A "video" is read as in
`pnd caption`'s manifests: a path relative to the captions file's folder, or absolute; if no such file exists, the
one listed video whose path ends with it (`clip.mp4`, `a/clip.mp4`); one that could mean two listed videos is refused.
Writes scores.pt, rankings.jsonl and metrics.md (if every video has a ground-truth caption) into --out, naming videos
by their paths from the folder that holds them all.

Data parallel and resumable as `pnd caption`: under torchrun / accelerate each rank scores every
WORLD_SIZE-th video and appends its score rows, one JSON record per video keyed by the video's resolved
path, to its own part file `--out/rows.jsonl.part-{rank}` as it goes; rank 0 merges them into
`--out/rows.jsonl` and computes the metrics on the whole matrix. Running the same command again after an
interruption, a crash or a killed rank, with any number of processes, scores only the videos without rows
(rows of other captions, model or settings are refused, not mixed in). A video that cannot be read is
named on stderr, gets no row and makes the exit status of its rank 1. Worker processes (--workers) decode
videos while the model scores.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import NamedTuple

import torch

from ..io.video import list_videos
from ..scoring.ranking import rerank
from ..validation import check_alpha_and_prior
from .inputs import decoded_videos
from .launch import Launch, add_model_arguments, check_counts, check_model_arguments, load_for_rank
from .records import ROW, ROWS, PartWriter, RecordsError, file_in_the_way, finished_records, merge, read_records
from .retrieval_inputs import fail, ground_truth, load_first_stage, read_captions
from .retrieval_report import report
from .signals import stopped_by


def add_arguments(parser) -> None:
    parser.add_argument("videos", nargs="+", help="video files, frame folders, or folders of them")
    parser.add_argument("--captions", required=True, help=".txt (one per line) or .jsonl with caption/video")
    parser.add_argument("--model", required=True, help="Hugging Face id or local folder")
    parser.add_argument("--alpha", type=float, default=0.9)
    parser.add_argument("--reduction", choices=["mean", "sum"], default="mean")
    parser.add_argument("--prompt", default="Describe the video.")
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--aligned", action="store_true", help="the i-th caption of a .txt belongs to the i-th video")
    parser.add_argument("--first-stage", help="first-stage similarities (videos x captions), .npy or .pt")
    parser.add_argument("--top-k", type=int, help="with --first-stage: candidates reranked per video (default 10)")
    parser.add_argument("--fuse", type=float, help="with --first-stage: weight of the first-stage similarity added to "
                        "the reranked scores (a finite number; default 0)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2,
                        help="processes decoding videos while the model scores (0: in the main process; default 2)")
    add_model_arguments(parser)
    parser.add_argument("--out", default="pnd_retrieval")
    parser.add_argument("--plot", action="store_true", help="save scores.png: matrices and prior vs caption length (not with --first-stage)")


def check_arguments(args) -> None:
    for option, default in (("top_k", 10), ("fuse", 0.0)):
        if getattr(args, option) is not None and not args.first_stage:
            fail(f"--{option.replace('_', '-')} sets the reranking of --first-stage, which is not given: pass "
                 "--first-stage sims.npy, or drop it.")
        setattr(args, option, default if getattr(args, option) is None else getattr(args, option))
    if not math.isfinite(args.fuse):
        fail(f"--fuse must be a finite number (the weight of the first-stage similarity), got {args.fuse}.")
    try:
        check_counts(args, ("batch_size", "frames", "top_k"))
        check_alpha_and_prior(args.alpha, "masked")
        check_model_arguments(args)
    except ValueError as error:
        fail(str(error))
    if args.plot and args.first_stage:
        fail("--plot draws the full score matrices, which --first-stage reranking does not compute (its top-k "
             "candidates only): drop --plot, or --first-stage to score every pair.")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file; --out is the folder pnd writes scores.pt, rankings.jsonl and metrics.md into.")
    if why := file_in_the_way(out):
        fail(f"--out {out}: {why}")
    existing = next(p for p in [out, *out.parents] if p.exists())
    if not os.access(existing, os.W_OK) or not existing.stat().st_mode & 0o222:
        fail(f"--out {out}: {existing} is read-only; pick a writable folder.")


def run(args) -> int:
    check_arguments(args)
    captions, caption_videos = read_captions(Path(args.captions))
    paths = list_videos(args.videos)
    if args.aligned and len(paths) != len(captions):
        fail(f"--aligned pairs the i-th caption with the i-th video, but there are {len(captions)} caption(s) and "
             f"{len(paths)} video(s).")
    ids = [str(path.resolve()) for path in paths]  # what score rows are keyed, resumed and merged on
    truth = list(range(len(paths))) if args.aligned else ground_truth(paths, ids, captions, caption_videos,
                                                                       Path(args.captions))
    first = load_first_stage(args.first_stage, (len(paths), len(captions))) if args.first_stage else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    launch = Launch.from_env()
    launch.start()
    try:
        rows = Rows(captions, first, settings_key(args, captions, first))
        return score_shard(args, out, Listed(paths, ids, truth), rows, launch)
    finally:
        launch.stop()


class Listed(NamedTuple):
    """The listed videos: their paths, ids (resolved paths) and ground-truth captions (an index, or None)."""

    paths: list[Path]
    ids: list[str]
    truth: list


class Rows(NamedTuple):
    """What every video's score rows are computed from, and the key that identifies those settings."""

    captions: list[str]
    first: torch.Tensor | None
    key: str


def settings_key(args, captions: list[str], first) -> str:
    """A digest of everything a score row depends on: rows written with other settings are not reused."""
    model = str(Path(args.model).resolve()) if Path(args.model).exists() else args.model
    settings = [model, args.alpha, args.reduction, args.prompt, args.frames, args.dtype, args.attn_implementation,
                args.load_in_4bit, args.load_in_8bit, captions]
    if first is not None:
        settings += [args.top_k, args.fuse, hashlib.sha256(first.numpy().tobytes()).hexdigest()]
    return hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:16]


def score_shard(args, out: Path, listed: Listed, rows: Rows, launch: Launch) -> int:
    """Score this rank's share of the videos `out` has no rows for yet, then rank 0 merges and reports."""
    rows_file = out / ROWS
    try:
        part = PartWriter(rows_file, launch.rank)
    except RecordsError as error:
        fail(str(error))
    failed = []
    with part:  # closed (and removed if empty) whatever happens, before the merge locks it
        done = finished_rows(rows_file, rows.key)
        launch.barrier()  # every rank has read what is done before any rank writes
        first_of = {}
        for i, id in enumerate(listed.ids):
            first_of.setdefault(id, i)
        pending = [i for id, i in first_of.items() if id not in done]
        if launch.rank == 0 and len(pending) < len(first_of):
            print(f"pnd retrieve: {rows_file} already has the rows of {len(first_of) - len(pending)} of these "
                  f"video(s); scoring the other {len(pending)}" + (f" over {launch.world_size} processes"
                                                                  if launch.world_size > 1 else ""), file=sys.stderr)
        try:
            score_videos(args, listed, launch.shard(pending), rows, part, failed, launch)
        except KeyboardInterrupt as interruption:  # Ctrl-C, or SIGTERM (pnd.cli.Terminated)
            how, status = stopped_by(interruption)
            print(f"pnd retrieve: {how}; the {part.written} row(s) of this run are kept in {part.path}. Run the "
                  "same command again to score the rest.", file=sys.stderr)
            return status
    launch.barrier()  # every part is complete
    status = 1 if failed else 0
    if launch.rank == 0:
        merge(rows_file, order=listed.ids, kind=ROW)
        status = report(args, listed.paths, listed.ids, rows.captions, listed.truth, read_records(rows_file, kind=ROW))
    elif failed:
        print(f"pnd retrieve: {len(failed)} video(s) of rank {launch.rank} failed: {', '.join(failed)}", file=sys.stderr)
    launch.barrier()  # no rank exits (which makes the launcher stop the others) before rank 0 has written
    return status


def finished_rows(rows_file: Path, key: str) -> set[str]:
    """Ids of the videos whose rows `rows_file` and its parts hold; rows of other settings are refused."""
    try:
        records = finished_records(rows_file, kind=ROW)
    except RecordsError as error:
        fail(str(error))
    if any(r["run"] != key for r in records):
        fail(f"{rows_file} holds score rows computed with other settings (captions, model, alpha, reduction, prompt, "
             f"frames, dtype, attention, quantization --load-in-4bit/8bit or first stage); pass another --out, or delete "
             f"{rows_file} to score every video again.")
    return {r["id"] for r in records}


def score_videos(args, listed: Listed, indices: list[int], rows: Rows, part: PartWriter, failed: list[str],
                 launch: Launch) -> None:
    """Score the listed videos `indices` into `part`, one row record per video; unreadable ones go to `failed`."""
    from tqdm.auto import tqdm

    from ..scoring.scorer import CaptionScorer

    scorer = None
    paths, ids = listed.paths, listed.ids
    videos = decoded_videos(indices, args.frames, paths.__getitem__, 1, args.workers if indices else 0)
    for [(i, clip, error)] in tqdm(videos, total=len(indices), desc=f"pnd retrieve (rank {launch.rank})", unit="video",
                                   disable=launch.rank != 0 or None):
        if error is not None:
            tqdm.write(f"pnd retrieve: skipped {error}", file=sys.stderr)
            failed.append(str(paths[i]))
            continue
        if scorer is None:  # loaded at the first readable video
            model, processor = load_for_rank(args, args.model, launch)
            try:
                scorer = CaptionScorer(model, processor, alpha=args.alpha, reduction=args.reduction,
                                       prompt=args.prompt, batch_size=args.batch_size)
            except ValueError as error:  # e.g. a --prompt that holds the processor's "<video>"
                fail(str(error))
        if rows.first is not None:
            def score_fn(query, chosen):
                return scorer.score([clip], [rows.captions[c] for c in chosen])[0]
            row = {"normalized": rerank(rows.first[i : i + 1], args.top_k, score_fn, args.fuse)[0],
                   "first_stage": rows.first[i]}
        else:
            row = {k: v[0] for k, v in scorer.score([clip], rows.captions, return_parts=True)._asdict().items()}
        part.write({"id": ids[i], "video": str(paths[i]), "run": rows.key, **{k: v.tolist() for k, v in row.items()}})


