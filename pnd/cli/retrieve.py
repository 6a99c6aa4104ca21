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

from ..extras import pyplot
from ..io.video import list_videos
from ..scoring.ranking import dual_softmax, inverted_softmax, rerank, retrieval_metrics, sinkhorn
from ..validation import check_alpha_and_prior
from .inputs import InputsError, decoded_videos, read_text
from .launch import Launch, add_model_arguments, check_counts, check_model_arguments, load_for_rank
from .records import ROW, ROWS, PartWriter, RecordsError, file_in_the_way, finished_records, merge, read_records
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


def fail(message: str):
    raise SystemExit(f"pnd retrieve: {message}")


def read_captions(path: Path) -> tuple[list[str], list[str | None]]:
    """(captions, the "video" of each caption or None); a bad line is named by its number. UTF-8 (a byte order mark
    is dropped) as `pnd caption`'s list files and manifests."""
    if not path.is_file():
        fail(f"--captions {path}: no such file.")
    try:
        text = read_text(path)
    except InputsError as error:
        fail(f"--captions {error}")
    captions, videos = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix.lower() == ".jsonl":
            try:
                row = json.loads(line)
                caption, video = row["caption"], row.get("video")
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                fail(f"{path}, line {number} is not a JSON object with a 'caption' ({type(error).__name__}: {error}).")
        else:
            caption, video = line.strip(), None
        if not isinstance(caption, str) or not caption.strip():
            fail(f"{path}, line {number}: the caption {caption!r} is empty; give it words or remove the line.")
        if video is not None and (not isinstance(video, str) or not video.strip()):
            fail(f"{path}, line {number}: 'video' must be the path of the caption's video, got {video!r}; leave it out "
                 "for a caption of no listed video.")
        captions.append(caption)
        videos.append(video)
    if not captions:
        fail(f"--captions {path} holds no caption.")
    return captions, videos


def load_first_stage(path: str, shape: tuple[int, int]) -> torch.Tensor:
    """The first-stage (videos x captions) similarities, checked: 2-D, numbers, finite, one row per listed video."""
    import numpy as np

    try:
        matrix = torch.from_numpy(np.load(path)) if path.endswith(".npy") else torch.load(path)
    except Exception as error:  # numpy and torch raise many types for missing or foreign files
        fail(f"--first-stage {path} cannot be read ({type(error).__name__}: {error}); give a .npy or .pt file "
             "holding one (videos x captions) matrix.")
    if not torch.is_tensor(matrix) or matrix.dtype == torch.bool or matrix.is_complex() or matrix.dim() != 2:
        what = f"a {tuple(matrix.shape)} {matrix.dtype} tensor" if torch.is_tensor(matrix) else type(matrix).__name__
        fail(f"--first-stage {path} holds {what}; it must be a 2-D matrix of real numbers (videos x captions).")
    if tuple(matrix.shape) != shape:
        fail(f"--first-stage {path} is {tuple(matrix.shape)}; it must be {shape}: one row per listed video (in the "
             "order pnd lists them, broken ones included) and one column per caption.")
    matrix = matrix.float()
    if not torch.isfinite(matrix).all():
        fail(f"--first-stage {path} has {int((~torch.isfinite(matrix)).sum())} NaN or infinite value(s); fix them.")
    return matrix


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
    truth = list(range(len(paths))) if args.aligned else ground_truth(paths, captions, caption_videos,
                                                                       Path(args.captions))
    first = load_first_stage(args.first_stage, (len(paths), len(captions))) if args.first_stage else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    launch = Launch.from_env()
    launch.start()
    try:
        return score_shard(args, out, paths, Rows(captions, first, settings_key(args, captions, first)), launch, truth)
    finally:
        launch.stop()


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


def score_shard(args, out: Path, paths: list[Path], rows: Rows, launch: Launch, truth: list) -> int:
    """Score this rank's share of the videos `out` has no rows for yet, then rank 0 merges and reports."""
    rows_file = out / ROWS
    ids = [str(path.resolve()) for path in paths]
    try:
        part = PartWriter(rows_file, launch.rank)
        done = finished_rows(rows_file, rows.key)
    except RecordsError as error:
        fail(str(error))
    launch.barrier()  # every rank has read what is done before any rank writes
    first_of = {}
    for i, id in enumerate(ids):
        first_of.setdefault(id, i)
    pending = [i for id, i in first_of.items() if id not in done]
    if launch.rank == 0 and len(pending) < len(first_of):
        print(f"pnd retrieve: {rows_file} already has the rows of {len(first_of) - len(pending)} of these video(s); "
              f"scoring the other {len(pending)}" + (f" over {launch.world_size} processes" if launch.world_size > 1
                                                    else ""), file=sys.stderr)
    failed = []
    try:
        with part:
            score_videos(args, paths, ids, launch.shard(pending), rows, part, failed, launch)
    except KeyboardInterrupt as interruption:  # Ctrl-C, or SIGTERM (pnd.cli.Terminated)
        how, status = stopped_by(interruption)
        print(f"pnd retrieve: {how}; the {part.written} row(s) of this run are kept in {part.path}. Run the "
              "same command again to score the rest.", file=sys.stderr)
        return status
    launch.barrier()  # every part is complete
    status = 1 if failed else 0
    if launch.rank == 0:
        merge(rows_file, order=ids, kind=ROW)
        status = report(args, paths, ids, rows.captions, truth, read_records(rows_file, kind=ROW))
    elif failed:
        print(f"pnd retrieve: {len(failed)} video(s) of rank {launch.rank} failed: {', '.join(failed)}", file=sys.stderr)
    launch.barrier()  # no rank exits (which makes the launcher stop the others) before rank 0 has written
    return status


def finished_rows(rows_file: Path, key: str) -> set[str]:
    """Ids of the videos whose rows `rows_file` and its parts hold; rows of other settings are refused."""
    records = finished_records(rows_file, kind=ROW)
    if any(r["run"] != key for r in records):
        fail(f"{rows_file} holds score rows computed with other settings (captions, model, alpha, reduction, prompt, "
             f"frames, dtype, attention or first stage); pass another --out, or delete {rows_file} to score every "
             "video again.")
    return {r["id"] for r in records}


def score_videos(args, paths: list[Path], ids: list[str], indices: list[int], rows: Rows, part: PartWriter,
                 failed: list[str], launch: Launch) -> None:
    """Score the listed videos `indices` into `part`, one row record per video; unreadable ones go to `failed`."""
    from tqdm.auto import tqdm

    from ..scoring.scorer import CaptionScorer

    scorer = None
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


def report(args, paths: list[Path], ids: list[str], captions: list[str], truth: list, records: list[dict]) -> int:
    """Write scores.pt, rankings.jsonl, metrics.md (and scores.png) from the rows of every readable video."""
    by_id = {r["id"]: r for r in records}
    kept = [i for i, id in enumerate(ids) if id in by_id]
    failed = [str(paths[i]) for i, id in enumerate(ids) if id not in by_id]
    if not kept:
        print("pnd retrieve: no readable video", file=sys.stderr)
        return 1
    keys = [k for k in ("normalized", "conditional", "prior", "first_stage") if k in by_id[ids[kept[0]]]]
    matrices = {k: torch.tensor([by_id[ids[i]][k] for i in kept], dtype=torch.float32) for k in keys}
    every_name = video_names(paths)
    names = [every_name[i] for i in kept]
    normalized = matrices["normalized"]
    out = Path(args.out)
    torch.save({**matrices, "videos": names, "captions": captions, "alpha": args.alpha}, out / "scores.pt")
    with open(out / "rankings.jsonl", "w") as f:
        for name, row in zip(names, normalized):
            order = [i for i in row.argsort(descending=True).tolist() if torch.isfinite(row[i])][:10]
            top = [{"caption_index": i, "caption": captions[i], "score": float(row[i])} for i in order]
            f.write(json.dumps({"video": name, "ranking": top}) + "\n")
    if any(torch.isnan(m).any() for m in matrices.values()):
        print(f"pnd retrieve: the model gave NaN scores (see {out}/scores.pt); no metrics. Try another --dtype "
              "or device.", file=sys.stderr)
        return 1
    targets = targets_of([truth[i] for i in kept], names)
    if targets is not None:
        table = metrics_table(matrices, targets, args.alpha)
        if "conditional" in matrices:
            table += "\n\n" + text_to_video_table(matrices["conditional"], targets)
        (out / "metrics.md").write_text(table + "\n")
        print(table)
    if args.plot and "conditional" in matrices:
        plot(matrices, caption_lengths(args.model, captions), out / "scores.png")
    print(f"pnd retrieve: wrote {out}/scores.pt, rankings.jsonl" + (", metrics.md" if targets is not None else ""))
    if failed:
        print(f"pnd retrieve: {len(failed)} video(s) failed and have no rows (a re-run retries them): "
              f"{', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def caption_lengths(model: str, captions: list[str]) -> list[int]:
    """Tokens per caption, as `CaptionScorer` scores them."""
    from transformers import AutoProcessor

    tokenizer = AutoProcessor.from_pretrained(model).tokenizer
    return [len(tokenizer(c, add_special_tokens=False).input_ids) for c in captions]


def video_names(paths: list[Path]) -> list[str]:
    """Each listed video's path from the deepest folder that holds them all: unambiguous, and short."""
    absolute = [os.path.abspath(path) for path in paths]
    root = os.path.commonpath([os.path.dirname(path) for path in absolute])
    return [os.path.relpath(path, root) for path in absolute]


def ground_truth(paths: list[Path], captions: list[str], caption_videos: list, manifest: Path) -> list[int | None]:
    """The index of each listed video's ground-truth caption (the first whose "video" names it, as the module says)."""
    ids = [str(path.resolve()) for path in paths]
    by_id, by_name = {}, {}
    for i, path in enumerate(paths):
        by_id.setdefault(ids[i], []).append(i)
        by_name.setdefault(path.name, []).append(i)
    truth = [None] * len(paths)
    for c, video in enumerate(caption_videos):
        if video is None:
            continue
        path = manifest.parent / video  # a file there that is not listed: a caption of an unlisted video
        named = by_id.get(str(path.resolve()), [] if path.exists() else None)
        if named is None:
            normal = Path(os.path.normpath(video))
            named = [i for i in by_name.get(normal.name, []) if Path(os.path.abspath(paths[i])).parts[-len(normal.parts):]
                     == normal.parts]
            if len({ids[i] for i in named}) > 1:
                fail(f"{manifest}: the caption {captions[c]!r} names the video {video!r}, which could be any of "
                     f"{', '.join(str(paths[i]) for i in named)}; give its path from {manifest.parent} (or absolute).")
        for i in named:
            truth[i] = c if truth[i] is None else truth[i]
    return truth


def targets_of(truth: list[int | None], names: list[str]) -> torch.Tensor | None:
    """The ground-truth caption of each scored video; None, said in one line, when one or more have none."""
    missing = [name for name, target in zip(names, truth) if target is None]
    if not missing:
        return torch.tensor(truth)
    shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
    print(f"pnd retrieve: {len(missing)} of the {len(names)} video(s) have no ground-truth caption ({shown}), so no "
          "metrics are computed; give each a caption whose \"video\" names it (or use --aligned).", file=sys.stderr)
    return None


def metrics_table(matrices: dict, targets: torch.Tensor, alpha: float) -> str:
    rows = []
    if "conditional" in matrices:
        rows.append(("likelihood log P(t|v) (alpha=0)", matrices["conditional"]))
        rows.append((f"prior-normalized (alpha={alpha})", matrices["normalized"]))
        rows.append(("prior-normalized + inverted softmax", inverted_softmax(matrices["normalized"])))  # over videos
        rows.append(("prior-normalized + dual softmax", dual_softmax(matrices["normalized"], log_scores=True)))
        rows.append(("prior-normalized + Sinkhorn", sinkhorn(matrices["normalized"])))
    else:
        rows.append(("first stage", matrices["first_stage"]))
        rows.append((f"reranked, prior-normalized (alpha={alpha})", matrices["normalized"]))
    return markdown_table("video->text scores", [(name, retrieval_metrics(s, targets)) for name, s in rows])


def text_to_video_table(conditional: torch.Tensor, targets: torch.Tensor) -> str:
    """Text->video ranks videos by log P(t|v): the caption prior is the same for every video."""
    metrics = retrieval_metrics(conditional[:, targets].T, torch.arange(len(targets)))
    return markdown_table("text->video scores", [("log P(t|v)", metrics)])


def markdown_table(title: str, rows: list[tuple[str, dict]]) -> str:
    lines = [f"| {title} | R@1 | R@5 | R@10 | MedR | MeanR |", "|---|---|---|---|---|---|"]
    for name, m in rows:
        lines.append(f"| {name} | {m['R@1']:.1f} | {m['R@5']:.1f} | {m['R@10']:.1f} | {m['MedR']:.1f} | {m['MeanR']:.2f} |")
    return "\n".join(lines)


def plot(matrices: dict, caption_lengths: list[int], path: Path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, key, title in zip(axes, ("conditional", "normalized"), ("log P(t|v)", "log P(t|v) - alpha log P(t)")):
        image = ax.imshow(matrices[key].numpy(), aspect="auto", cmap="viridis")
        ax.set(title=title, xlabel="caption", ylabel="video")
        fig.colorbar(image, ax=ax)
    axes[2].scatter(caption_lengths, matrices["prior"][0].numpy())
    axes[2].set(title="caption prior vs length", xlabel="caption tokens", ylabel="log P(t)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
