"""Prefill cost of the prior, packed into the conditioned call or run as a call of its own, as ratios to plain.

    .venv/bin/python benchmarks/bench_prefill.py [--arch llava_onevision] [--size cpu] [--device cpu]
        [--dtype float32] [--frames 32] [--repeats 15] [--threads 2] [--out FILE]

On a GPU: `--size 7b --device cuda --dtype bfloat16 [--arch qwen2_vl|qwen3_vl|qwen3_5]`. Qwen3.5's recurrent layers
never take the packed prefill: its first two pnd rows are then both the prior's own call on the kept tokens.

pnd appends the prior's text tokens (the text after the video) to the conditioned prompt, so that one
language-model call reads the weights once (`pnd/decoding/packed.py`). The other rows are the fallback for models
without SDPA attention, the prior's own call: with the text before the video copied from the
conditioned cache, and without that reuse. Plain `generate` and the variants produce one token each,
round after round; each round's times are divided by plain's of the same round.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from prompts import video_inputs
from reporting import hardware
from results import write_section
from shapes import ARCHS, build_model
from timing import generate, sync

import pnd


def variants() -> dict:
    """name -> (the `pnd.attach` prefill strategy, processors) to run generate with."""
    return {
        "plain generate": ("auto", []),
        "pnd (prior packed into the conditioned call)": ("auto", [pnd.PriorNormalized(0.5)]),
        "pnd, prior in its own call": ("own_call", [pnd.PriorNormalized(0.5)]),
        "pnd, prior in its own call, no reuse": ("own_call_no_reuse", [pnd.PriorNormalized(0.5)]),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=ARCHS, default="llava_onevision")
    parser.add_argument("--size", default="cpu")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write the result to this Markdown file (its prior-prefill section)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model = build_model(args.arch, args.size, device, getattr(torch, args.dtype))
    inputs, _ = video_inputs(model, args.size, args.frames)
    runs = variants()
    times = {name: [] for name in runs}
    for repeat in range(args.repeats + 1):
        for name, (prefill, processors) in runs.items():
            pnd.detach(model)
            pnd.attach(model, prefill=prefill)
            sync(device)
            start = time.perf_counter()
            generate(model, inputs, processors, 1, do_sample=False)
            sync(device)
            if repeat:  # the first round is a warm-up
                times[name].append(time.perf_counter() - start)
    plain = times["plain generate"]
    lines = [f"{hardware(device)}, {args.dtype}, random {args.arch} ({args.size} shape), {inputs['input_ids'].shape[1]}-token "
             f"prompt with a {args.frames}-frame video (14 text tokens before it, 24 after); one generated token; "
             f"{args.repeats} rounds, each running every variant once in a row; ratio: the median over rounds of "
             "the variant's time over plain's in that round (drifts of the machine between rounds cancel out).", "",
             "| prefill | median ms | ratio to plain | lowest-highest ratio of a round |", "|---|---|---|---|"]
    for name, seconds in times.items():
        ratios = [s / p for s, p in zip(seconds, plain)]
        lines.append(f"| {name} | {statistics.median(seconds) * 1e3:.0f} | {statistics.median(ratios):.3f}x | "
                     f"{min(ratios):.3f}-{max(ratios):.3f} |")
    print("\n".join(lines))
    if args.out:
        write_section(Path(args.out), f"Prior prefill: packed or its own call; {args.arch}, {args.size}, {hardware(device)}",
                      "\n".join(lines))
    return {name: statistics.median(seconds) for name, seconds in times.items()}


if __name__ == "__main__":
    main()
