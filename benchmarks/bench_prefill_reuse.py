"""Prefill cost of the prior with and without reusing the text before the video, as ratios to plain, in one run.

    .venv/bin/python benchmarks/bench_prefill_reuse.py [--frames 32] [--repeats 5] [--threads 2] [--out FILE]

pnd's prior prefill copies the keys/values of the text before the first visual token from the
conditioned cache and runs the language model on the text after it only. "without reuse" calls the
same prefill without the conditioned cache, so that every text token is computed, as before that
change. Plain `generate`, pnd and pnd without reuse produce one token each, interleaved; medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

import pnd
import pnd.paired
from bench_decode import build_model, generate, video_inputs
from results import write_section


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="cpu")
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write the result to this Markdown file (its prefill-reuse section)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = pnd.attach(build_model("llava_onevision", args.size))
    inputs, _ = video_inputs(model, args.size, args.frames)
    reuse = pnd.paired.masked_prefill
    variants = {"plain": (reuse, []), "pnd": (reuse, [pnd.PriorNormalized(0.5)]),
                "pnd without reuse": (lambda *a: reuse(*a[:5]), [pnd.PriorNormalized(0.5)])}
    times = {name: [] for name in variants}
    try:
        for repeat in range(args.repeats + 1):
            for name, (prefill, processors) in variants.items():
                pnd.paired.masked_prefill = prefill
                start = time.perf_counter()
                generate(model, inputs, processors, 1, do_sample=False)
                if repeat:  # the first round is a warm-up
                    times[name].append(time.perf_counter() - start)
    finally:
        pnd.paired.masked_prefill = reuse
    medians = {name: statistics.median(t) for name, t in times.items()}
    lines = [f"CPU ({args.threads} threads), random LLaVA-OneVision ({args.size} shape), {inputs['input_ids'].shape[1]}-token "
             f"prompt with a {args.frames}-frame video (14 text tokens before it, 24 after); one generated token, "
             f"median of {args.repeats} interleaved runs.", "", "| prefill | ms | ratio |", "|---|---|---|"]
    lines += [f"| {name} | {seconds * 1e3:.0f} | {seconds / medians['plain']:.3f}x |" for name, seconds in medians.items()]
    print("\n".join(lines))
    if args.out:
        write_section(Path(args.out), "Prior prefill: reusing the text before the video", "\n".join(lines))
    return medians


if __name__ == "__main__":
    main()
