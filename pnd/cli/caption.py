"""`pnd caption`: caption videos with prior-normalized greedy decoding, one record per video.

    pnd caption videos/ clip.mp4 list.txt manifest.jsonl --model llava-hf/llava-onevision-qwen2-7b-ov-hf \
        --alpha 0.5 --out captions.jsonl [--plausibility 0.1] [--frames 8] [--prompt "Describe the video."] [--compare]
    pnd caption videos/ --method vcd --method-args noise_step=500,alpha=1 --out captions.jsonl   # docs/methods.md
    torchrun --nproc_per_node 8 -m pnd.cli caption ...          # one process per GPU, any number of nodes
    accelerate launch --num_processes 8 -m pnd.cli caption ...

Inputs: video files, frame folders, folder trees, list files (.txt, one path per line) and manifests
(.jsonl/.csv/.parquet with a `video` column, optional `prompt` and `id`). Without --model the bundled demo
model captions (`pnd demo` says what it shows). Each record is {"id", "video", "caption", "alpha", "prompt"} and
the settings its caption was made with: "model" (a local folder resolved), "method", "settings" (all of the
method's), "frames", "max_new_tokens", "dtype", "attn_implementation", "quantization" (with --compare also
"plain", the caption without normalization); --out is JSON lines, or Parquet when it ends in .parquet (any case).

Each process (rank) captions every WORLD_SIZE-th video not yet captioned and appends its records to its own
part file next to --out as they finish (`captions.jsonl.part-00000`, ...); at the end rank 0 merges the parts
into --out, each video once. Running the same command again after an interruption, a crash or a killed
rank, with any number of processes, captions only what is missing (the key is the video's resolved path, or
the manifest's id); `pnd merge --out captions.jsonl` merges the parts of a job that never reached its end. An --out
whose records were made with other settings (any of the above, or another prompt for the same video) is refused
before the model loads, naming the setting: captions of two settings are never mixed in one file.
Worker processes (--workers) decode videos while the model captions. A video that cannot be read is named
on stderr, left out of --out (a re-run retries it) and makes the exit status 1. Every argument is checked
before any model loads; a method the loaded model cannot run (e.g. PAI's layers on a 2-layer model) is one line
and exit 1, before any caption is written.

Example:
    >>> from pnd.cli import main
    >>> main(["caption", "clip.mp4", "--alpha", "0.5", "--out", "captions.jsonl"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import sys
import time
from operator import attrgetter
from pathlib import Path

import torch

from ..decoding.captioning import VideosRefused, generate_captions
from ..decoding.methods import method
from ..io.prompts import video_prompt
from .inputs import InputsError, Item, decoded_videos, read_inputs
from .launch import Launch, add_model_arguments, check_counts, check_model_arguments, load_for_rank, rank_device_dtype
from .method_args import add_method_arguments, method_settings
from .records import PartWriter, RecordsError, file_in_the_way, finished_ids, finished_records, merge, record_id
from .signals import stopped_by

DEMO_MODEL_ID = "pnd-demo"
WINDOW = 4  # decoded batches sorted together into batches of one prompt and similar length (`length_batches`)


def add_arguments(parser) -> None:
    parser.add_argument("videos", nargs="+", help="video files (mp4, webm, avi, gif, ...), frame folders, folder trees, "
                        "list files (.txt) or manifests (.jsonl, .csv, .parquet with a 'video' column)")
    parser.add_argument("--model", help="Hugging Face id or local folder (default: the bundled demo model)")
    parser.add_argument("--alpha", type=float, help="weight of the prior in [0, 1] (default: the method's, 0.5 for cpn)")
    parser.add_argument("--plausibility", type=float, help="drop tokens below this share of the top token's probability")
    add_method_arguments(parser)
    parser.add_argument("--frames", type=int, default=8, help="frames sampled uniformly per video (default 8)")
    parser.add_argument("--prompt", default="Describe the video.", help="instruction (a manifest's 'prompt' wins)")
    parser.add_argument("--compare", action="store_true", help="also decode without normalization; print both")
    parser.add_argument("--out", default="captions.jsonl",
                        help="JSON lines, or Parquet when it ends in .parquet; resumed with the same settings "
                        "(default captions.jsonl)")
    parser.add_argument("--batch-size", type=int, default=8, help="videos captioned per generate call (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2,
                        help="processes decoding videos while the model captions (0: in the main process; default 2)")
    add_model_arguments(parser)


def check_arguments(args) -> Path:
    """Refuse bad arguments before anything loads; returns --out (its folder created if missing)."""
    try:
        check_counts(args, ("batch_size", "frames", "max_new_tokens"))
        args.settings = method_settings(args)  # the flags win over --method-args
        args.alpha = method(args.method).settings(**args.settings).get("alpha")
        check_model_arguments(args)
    except ValueError as error:
        fail(str(error))
    return check_output_file(Path(args.out))


def check_output_file(out: Path) -> Path:
    """--out must be a file pnd can write next to and, if it exists, a captions file (checked, not touched)."""
    if out.is_dir():
        fail(f"--out {out} is a folder; name a file, e.g. --out {out / 'captions.jsonl'}.")
    if why := file_in_the_way(out):
        fail(f"--out {out}: {why}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(out.parent, os.W_OK) or not out.parent.stat().st_mode & 0o222:
        fail(f"--out {out}: the folder {out.parent} is read-only; pick a writable one.")
    if out.exists():
        if not out.stat().st_mode & stat.S_IWUSR:
            fail(f"--out {out} is read-only; make it writable (chmod u+w) or pass another --out.")
        try:
            finished_ids(out, quiet=True)
        except RecordsError as error:
            fail(str(error))
    return out


def fail(message: str):
    raise SystemExit(f"pnd caption: {message}")


def run(args) -> int:
    out = check_arguments(args)
    try:
        items = read_inputs(args.videos)
    except InputsError as error:
        fail(str(error))
    if not items:
        fail(f"no video found in {' '.join(args.videos)}")
    launch = Launch.from_env()
    launch.start()
    try:
        return caption_shard(args, out, items, launch)
    finally:
        launch.stop()


def caption_shard(args, out: Path, items: list[Item], launch: Launch) -> int:
    """Caption this rank's share of what `out` and its parts do not hold yet, then rank 0 merges."""
    args.stamp = run_settings(args, launch)
    done = resumable_ids(out, items, args)
    try:
        part = PartWriter(out, launch.rank)
    except RecordsError as error:
        fail(str(error))
    launch.barrier()  # every rank has read what is done before any rank writes
    pending = [item for item in items if item.id not in done]
    if launch.rank == 0 and len(pending) < len(items):
        print(f"pnd caption: {out} already has {len(items) - len(pending)} of these video(s); captioning the other "
              f"{len(pending)}" + (f" over {launch.world_size} processes" if launch.world_size > 1 else ""),
              file=sys.stderr)
    failed = []
    try:
        with part:
            caption_items(args, launch.shard(pending), part, failed, launch)
    except KeyboardInterrupt as interruption:  # Ctrl-C, or SIGTERM (pnd.cli.Terminated)
        how, status = stopped_by(interruption)
        kept = f"the {part.written} caption(s) of this run are kept in {part.path}" if part.written else \
            "no caption of this run was finished"
        print(f"pnd caption: {how}; {kept}. Run the same command again to caption the rest, or `pnd merge --out "
              f"{out}` to put what is done into {out}.", file=sys.stderr)
        return status
    launch.barrier()  # every part is complete
    if launch.rank == 0:
        total = merge(out, order=[item.id for item in items])
        print(f"pnd caption: {out} holds {total} caption(s)"
              + (f"; {len(failed)} video(s) of rank 0 failed: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    elif failed:
        print(f"pnd caption: {len(failed)} video(s) of rank {launch.rank} failed: {', '.join(failed)}", file=sys.stderr)
    launch.barrier()  # no rank exits (which makes the launcher stop the others) before rank 0 has merged
    return 1 if failed else 0


def run_settings(args, launch: Launch) -> dict:
    """What each caption of this run depends on besides its video and prompt, as stamped in its record (and as read
    back: JSON values): a run resumes an --out only where its records were made with the same."""
    model = args.model or DEMO_MODEL_ID
    if args.model and Path(args.model).exists():
        model = str(Path(args.model).resolve())
    stamp = {"model": model, "method": args.method, "settings": method(args.method).settings(**args.settings),
             "frames": args.frames, "max_new_tokens": args.max_new_tokens,
             "dtype": rank_device_dtype(args, launch)[1],
             "attn_implementation": args.attn_implementation,
             "quantization": "4bit" if args.load_in_4bit else "8bit" if args.load_in_8bit else None}
    return json.loads(json.dumps(stamp))


def resumable_ids(out: Path, items: list[Item], args) -> set[str]:
    """Ids of the videos `out` and its parts hold captions of; refused (one line naming the setting and the fix)
    where a record was made with other settings than `args.stamp`, or for one of `items` with another prompt."""
    try:
        finished = finished_records(out)
    except RecordsError as error:
        fail(str(error))
    prompts = {item.id: item.prompt or args.prompt for item in items}
    for record in finished:
        theirs = {key: record.get(key) for key in args.stamp} | {"prompt": record.get("prompt")}
        ours = args.stamp | {"prompt": prompts.get(record_id(record), theirs["prompt"])}
        if difference := first_difference(theirs, ours):
            name, there, here = difference
            name += "" if name.endswith("=") else " "
            fail(f"{out} holds captions made with other settings ({record['video']}'s: {name}{there}; this run: "
                 f"{name}{here}). Pass another --out for this run's captions, or run with {out}'s settings to "
                 "finish it.")
    return {record_id(r) for r in finished}


def first_difference(theirs: dict, ours: dict) -> tuple[str, str, str] | None:
    """(the option, its value in `theirs`, in `ours`) of the first setting that differs, the method's settings one by
    one; None where none does. A value a record lacks (an earlier pnd's record, Parquet's nulls) is None.

    Example:
        >>> first_difference({"frames": 8, "settings": {"alpha": 0.5, "seed": 0}},
        ...                  {"frames": 8, "settings": {"alpha": 0.5, "seed": 1}})
        ('--method-args seed=', '0', '1')
    """
    theirs, ours = by_option(theirs), by_option(ours)
    for option, value in ours.items():
        if theirs.get(option) != value:
            return option, shown(theirs.get(option)), shown(value)
    return None


def shown(value) -> str:
    """A setting's value as a message shows it: JSON, None as none."""
    return "none" if value is None else json.dumps(value)


def by_option(settings: dict) -> dict:
    """A record's `settings` keyed by the option that sets each, the method's settings one by one."""
    options = {}
    for key, value in settings.items():
        if key == "settings" and isinstance(value, dict):
            options |= {f"--{k}" if k in ("alpha", "plausibility") else f"--method-args {k}=": v for k, v in value.items()}
        else:
            options[{"prompt": "prompt", "quantization": "--load-in-4bit/8bit"}.get(key, f"--{key.replace('_', '-')}")] = value
    return options


def caption_items(args, items: list[Item], part: PartWriter, failed: list[str], launch: Launch) -> None:
    """Caption `items` into `part`; the names of videos that cannot be read go to `failed`."""
    from tqdm.auto import tqdm

    from ..decoding.paired import attach
    from ..demo import DEMO_MODEL

    if not items:
        return
    batches = decoded_videos(items, args.frames, attrgetter("video"), args.batch_size, args.workers)
    model, processor = load_for_rank(args, args.model or str(DEMO_MODEL), launch)
    if getattr(processor, "video_processor", None) is None:
        fail(f"{model.config.model_type}'s processor takes images only (it has no video processor), and pnd caption "
             "captions videos. Use a model of a family that takes video (`pnd models --families`), or score a "
             "video's frames as images with pnd.CaptionScorer.")
    for prompt, item in {item.prompt or args.prompt: item for item in items}.items():
        try:  # before any video: a prompt that holds the processor's "<video>" would fail every video it goes with
            video_prompt(processor, prompt)
        except ValueError as error:
            fail(f"{'--prompt' if item.prompt is None else f'the prompt of {item.video}'}: {error}")
    attach(model, processor)
    if args.compare:
        label = f"alpha {args.alpha}" if args.method == "cpn" else args.method
        print(f"| video | plain | normalized ({label}) |\n|---|---|---|")
    started, waited, window = time.perf_counter(), 0.0, []
    with tqdm(total=len(items), desc=f"pnd caption (rank {launch.rank})", unit="video",
              disable=None if launch.rank == 0 else True) as bar:
        while True:
            wait_start = time.perf_counter()
            batch = next(batches, None)
            waited += time.perf_counter() - wait_start
            for item, frames, error in batch or []:
                if error is None:
                    window.append((item, frames))
                else:
                    tqdm.write(f"pnd caption: failed {error}", file=sys.stderr)
                    failed.append(item.video)
                    bar.update(1)
            if window and (batch is None or len(window) >= WINDOW * args.batch_size):
                for chunk in length_batches(window, args.batch_size, args.prompt):
                    for record in caption_records(model, processor, chunk, args):
                        if "error" in record:
                            tqdm.write(f"pnd caption: failed {record['video']}: {record['error']}", file=sys.stderr)
                            failed.append(record["video"])
                            continue
                        if "plain" in record:
                            tqdm.write(f"| {Path(record['video']).name} | {record['plain']} | {record['caption']} |")
                        part.write(record)
                    bar.update(len(chunk))
                window = []
            if batch is None:
                break
    elapsed = time.perf_counter() - started
    print(f"pnd caption: rank {launch.rank}: {len(items)} video(s) in {elapsed:.2f} s after the model loaded, "
          f"{waited:.2f} s ({100 * waited / elapsed:.0f}%) waiting for decoded video", file=sys.stderr)


def length_batches(videos: list[tuple[Item, torch.Tensor]], batch_size: int, prompt: str) -> list[list]:
    """`videos` ((item, frames) pairs) in batches of at most `batch_size` that pad little: each batch has one
    prompt (an item's own, else `prompt`) and, in order of size, videos of about the same number of pixels,
    whose prompts are as long or about as long in tokens (frames x tokens per frame + prompt tokens).

    Example:
        >>> import torch
        >>> from pnd.cli.inputs import Item
        >>> videos = [(Item(str(i), f"{i}.mp4", p), torch.zeros(2, 3, s, s)) for i, (p, s) in
        ...           enumerate([(None, 8), ("Why?", 8), (None, 4), ("Why?", 8), (None, 8)])]
        >>> [[item.id for item, _ in batch] for batch in length_batches(videos, 2, "Describe.")]
        [['2', '0'], ['4'], ['1', '3']]
    """
    ordered = sorted(videos, key=lambda video: (video[0].prompt or prompt, video[1].numel()))
    batches: list[list] = []
    for _, same_prompt in itertools.groupby(ordered, key=lambda video: video[0].prompt or prompt):
        same_prompt = list(same_prompt)
        batches += [same_prompt[i : i + batch_size] for i in range(0, len(same_prompt), batch_size)]
    return batches


def caption_records(model, processor, batch: list[tuple[Item, torch.Tensor]], args) -> list[dict]:
    """One output record per (item, frames) of the batch, in order; videos with one prompt are captioned together. A
    video the processor refuses gets {"video": ..., "error": why} (its batch is captioned again one video at a time,
    as after any ValueError); any other ValueError of one video (the method cannot run on the model) ends the run
    with one line."""
    by_prompt: dict[str, list[int]] = {}
    for i, (item, _) in enumerate(batch):
        by_prompt.setdefault(item.prompt or args.prompt, []).append(i)
    records: list = [None] * len(batch)
    for prompt, indices in by_prompt.items():
        videos = [batch[i][1] for i in indices]
        decode = dict(prompt=prompt, max_new_tokens=args.max_new_tokens)
        try:
            captions = generate_captions(model, processor, videos, None, method=args.method, settings=args.settings,
                                         **decode)
            plains = generate_captions(model, processor, videos, None, **decode) if args.compare else [None] * len(videos)
        except ValueError as error:  # VideosRefused: these videos; any other, alone: the method or model, every video
            if len(indices) == 1 and not isinstance(error, VideosRefused):
                fail(str(error))
            for i in indices:
                records[i] = caption_records(model, processor, [batch[i]], args)[0] if len(indices) > 1 else \
                    {"video": batch[i][0].video, "error": str(error)}
            continue
        for i, caption, plain in zip(indices, captions, plains):
            item = batch[i][0]
            records[i] = {"id": item.id, "video": item.video, "caption": caption, "alpha": args.alpha,
                          "prompt": prompt, **args.stamp}
            if plain is not None:
                records[i]["plain"] = plain
    return records
