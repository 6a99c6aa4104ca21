"""Train the bundled demo model and write the sample videos (a few minutes on CPU, fixed seed).

    .venv/bin/python tools/train_demo_model.py [--steps 1500] [--seed 0] [--out pnd/demo/model]

Saves the model and its processor with `save_pretrained` into --out, writes the sample videos into
pnd/demo/videos, and prints the SHA-256 of the weights so that two runs can be compared.
"""

import argparse
import hashlib
import time
from pathlib import Path

import torch

from pnd.demo import SAMPLE_VIDEOS
from pnd.demo.moving import FRAMES, make_moving_clip
from pnd.demo.training import train_demo_model
from pnd.io.video import write_video

# (colour, size, motion, file suffix): none is the planted small red square, so plain decoding tends to be wrong
SAMPLES = [("blue", "medium", "right", ".mp4"), ("green", "big", "up", ".mp4"),
           ("yellow", "medium", "down", ".webm"), ("red", "big", "left", ".mp4")]
SAMPLE_NOISE = 0.85


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parents[1] / "pnd" / "demo" / "model"))
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread: the same float reductions on every machine size
    start = time.time()
    model, processor = train_demo_model(steps=args.steps, seed=args.seed, progress=True)
    print(f"trained {args.steps} steps in {time.time() - start:.0f} s")
    model.save_pretrained(args.out)
    processor.save_pretrained(args.out)
    digest = hashlib.sha256((Path(args.out) / "model.safetensors").read_bytes()).hexdigest()
    print(f"saved {args.out}; model.safetensors sha256 {digest}")

    SAMPLE_VIDEOS.mkdir(exist_ok=True)
    generator = torch.Generator().manual_seed(args.seed + 2000)
    for colour, size, motion, suffix in SAMPLES:
        clip = make_moving_clip(colour, size, generator, SAMPLE_NOISE, motion, frames=2 * FRAMES)
        write_video(SAMPLE_VIDEOS / f"{size}_{colour}_square_moves_{motion}{suffix}", clip)
    print(f"wrote {len(SAMPLES)} sample videos into {SAMPLE_VIDEOS}")


if __name__ == "__main__":
    main()
