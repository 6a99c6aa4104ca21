"""`pnd caption`: caption videos with prior-normalized greedy decoding, one JSON line per video.

    pnd caption videos/ clip.mp4 --model llava-hf/llava-onevision-qwen2-7b-ov-hf --alpha 0.5 \
        --out captions.jsonl [--plausibility 0.1] [--frames 8] [--prompt "Describe the video."] [--compare]

Without --model the bundled demo model captions (`pnd demo` says what it shows). Each line of --out is
{"video": path, "caption": ..., "alpha": ...} (with --compare also "plain", the caption without
normalization). Lines are written as videos finish; videos already in --out are skipped, so running the
same command again after an interruption only captions the rest. A video that cannot be read is named
on stderr, left out of --out (a re-run retries it) and makes the exit status 1.

Example:
    >>> from pnd.cli import main
    >>> main(["caption", "clip.mp4", "--alpha", "0.5", "--out", "captions.jsonl"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from ..captioning import generate_captions
from ..logits_processor import PriorNormalized
from ..video import VideoReadError, list_videos, read_video


def add_arguments(parser) -> None:
    parser.add_argument("videos", nargs="+", help="video files (mp4, webm, avi, gif, ...), frame folders, or folders of them")
    parser.add_argument("--model", help="Hugging Face id or local folder (default: the bundled demo model)")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the prior in [0, 1] (default 0.5)")
    parser.add_argument("--plausibility", type=float, help="drop tokens below this share of the top token's probability")
    parser.add_argument("--frames", type=int, default=8, help="frames sampled uniformly per video (default 8)")
    parser.add_argument("--prompt", default="Describe the video.")
    parser.add_argument("--compare", action="store_true", help="also decode without normalization; print both")
    parser.add_argument("--out", default="captions.jsonl", help="JSON lines, appended to (default captions.jsonl)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--load-in-4bit", action="store_true")
    parser.add_argument("--load-in-8bit", action="store_true")


def finished_videos(out: Path) -> set[Path]:
    """Videos already captioned in `out` (resolved paths). An unfinished last line is cut off the file."""
    if not out.exists():
        return set()
    text = out.read_text()
    complete = text[: text.rfind("\n") + 1]
    if complete != text:
        print(f"pnd caption: {out}: dropped an unfinished last line from an interrupted run", file=sys.stderr)
        out.write_text(complete)
    done = set()
    for number, line in enumerate(complete.splitlines(), 1):
        try:
            done.add(Path(json.loads(line)["video"]).resolve())
        except (ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"pnd caption: {out}, line {number} is not a caption record ({error}); "
                             "pass another --out or remove the file.") from error
    return done


def run(args) -> int:
    from tqdm.auto import tqdm

    from ..demo import DEMO_MODEL
    from ..loading import load_model
    from ..paired import attach

    try:
        PriorNormalized(args.alpha, plausibility=args.plausibility)  # bad values fail before the model loads
    except ValueError as error:
        raise SystemExit(f"pnd caption: {error}") from error
    out = Path(args.out)
    done = finished_videos(out)
    paths = [p for p in list_videos(args.videos) if p.resolve() not in done]
    if done:
        print(f"pnd caption: {out} already has {len(done)} video(s); captioning the other {len(paths)}",
              file=sys.stderr)
    if not paths:
        print("pnd caption: nothing to caption: " + (f"every video is already in {out}" if done else
              f"no video found in {' '.join(args.videos)}"), file=sys.stderr)
        return 0 if done else 1
    model, processor = load_model(args.model or str(DEMO_MODEL), args.device, load_in_4bit=args.load_in_4bit,
                                  load_in_8bit=args.load_in_8bit)
    attach(model)
    failed = []
    if args.compare:
        print(f"| video | plain | normalized (alpha {args.alpha}) |\n|---|---|---|")
    with open(out, "a") as f, tqdm(total=len(paths), desc="pnd caption", unit="video") as bar:
        for start in range(0, len(paths), args.batch_size):
            chunk = paths[start : start + args.batch_size]
            batch = []
            for path in chunk:
                try:
                    batch.append((path, read_video(path, args.frames)))
                except VideoReadError as error:
                    tqdm.write(f"pnd caption: failed {error}", file=sys.stderr)
                    failed.append(path)
            for record in caption_records(model, processor, batch, args):
                if "plain" in record:
                    tqdm.write(f"| {Path(record['video']).name} | {record['plain']} | {record['caption']} |")
                f.write(json.dumps(record) + "\n")
                f.flush()
            bar.update(len(chunk))
    print(f"pnd caption: wrote {len(paths) - len(failed)} caption(s) to {out}"
          + (f"; {len(failed)} video(s) failed: {', '.join(map(str, failed))}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


def caption_records(model, processor, batch: list[tuple[Path, torch.Tensor]], args) -> list[dict]:
    """One output record per (path, frames) of the batch, as `pnd caption` writes them."""
    if not batch:
        return []
    videos = [v for _, v in batch]
    decode = dict(prompt=args.prompt, max_new_tokens=args.max_new_tokens)
    captions = generate_captions(model, processor, videos, args.alpha, plausibility=args.plausibility, **decode)
    records = [{"video": str(path), "caption": c, "alpha": args.alpha} for (path, _), c in zip(batch, captions)]
    if args.compare:
        for record, plain in zip(records, generate_captions(model, processor, videos, None, **decode)):
            record["plain"] = plain
    return records
