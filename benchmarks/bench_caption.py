"""`pnd caption` throughput: videos/s with 1 or 2 processes (torchrun) and 0 or 2 decoding workers.

    .venv/bin/python benchmarks/bench_caption.py [--videos 24] [--frames-per-video 64] [--side 256] [--model M]

Writes `--videos` real mp4 files (H.264, `--frames-per-video` frames of `--side` x `--side`), then runs the
`pnd caption` console script on them in each setting and reads what every rank reports on stderr: its
captioning time after the model loaded and the share of it spent waiting for decoded video. videos/s is
the number of videos over the slowest rank's time (model loading and interpreter start excluded).
Default model: the bundled demo model (tiny: decoding dominates); pass --model for a real one.
GPU: `--device auto` is the default of `pnd caption`; run this on a GPU machine with `--model`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from results import write_section

from pnd.demo.moving import make_moving_clip
from pnd.io.video import write_video

BIN = Path(sys.executable).parent
REPORT = re.compile(r"rank (\d+): (\d+) video\(s\) in ([\d.]+) s after the model loaded, ([\d.]+) s")


def write_videos(folder: Path, count: int, frames: int, side: int) -> None:
    generator = torch.Generator().manual_seed(0)
    for i in range(count):
        clip = make_moving_clip("blue", "big", generator, noise=0.5, frames=frames)
        big = torch.nn.functional.interpolate(clip.float(), size=(side, side)).to(torch.uint8)
        write_video(folder / f"{i:03d}.mp4", big)


def run(folder: Path, processes: int, workers: int, extra: list[str]) -> dict:
    """{"videos_per_s", "wait_share"} of one `pnd caption` run over `folder`."""
    out = folder.parent / f"captions-{processes}-{workers}.jsonl"
    launcher = ([str(BIN / "torchrun"), "--nproc_per_node", str(processes), "-m", "pnd.cli"] if processes > 1
                else [str(BIN / "pnd")])
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // processes))}
    result = subprocess.run([*launcher, "caption", str(folder), "--out", str(out), "--workers", str(workers), *extra],
                            capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    ranks = [(int(n), float(t), float(w)) for _, n, t, w in REPORT.findall(result.stderr)]
    assert len(ranks) == processes, result.stderr
    return {"videos_per_s": sum(n for n, _, _ in ranks) / max(t for _, t, _ in ranks),
            "wait_share": sum(w for _, _, w in ranks) / sum(t for _, t, _ in ranks)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=24)
    parser.add_argument("--frames-per-video", type=int, default=64)
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--model", help="default: the bundled demo model")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--settings", default="1x0,1x2,2x0,2x2", help="processes x workers, comma separated")
    parser.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args(argv)
    extra = ["--max-new-tokens", str(args.max_new_tokens), "--batch-size", str(args.batch_size)]
    extra += ["--model", args.model] if args.model else []
    table = {}
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "videos"
        folder.mkdir()
        write_videos(folder, args.videos, args.frames_per_video, args.side)
        for setting in args.settings.split(","):
            processes, workers = map(int, setting.split("x"))
            table[(processes, workers)] = run(folder, processes, workers, extra)
            print(setting, table[(processes, workers)], flush=True)
    lines = [f"{args.videos} mp4 files of {args.frames_per_video} frames at {args.side}x{args.side}, model "
             f"{args.model or 'pnd demo'}, batch {args.batch_size}, {args.max_new_tokens} new tokens, "
             f"{os.cpu_count()} CPU cores.", "",
             "| processes | decoding workers | videos/s | time waiting for video |", "|---|---|---|---|"]
    lines += [f"| {p} | {w} | {r['videos_per_s']:.2f} | {100 * r['wait_share']:.0f}% |" for (p, w), r in table.items()]
    write_section(Path(args.out), "Captioning throughput (pnd caption)", "\n".join(lines))
    return table


if __name__ == "__main__":
    main()
