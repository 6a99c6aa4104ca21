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

Where the time goes: hooks on the language model (`model.get_decoder()`, synced on a GPU) time its calls and count
their tokens, so that each row also gives the language model's time and tokens, and the rest (vision tower,
embedding, pnd's own work around the call: the prior's slots, its mask, laying out its cache rows). The packed row
is at its share when its language-model time over plain's equals its tokens over plain's.
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


class LanguageModelClock:
    """Seconds and tokens of the language model's calls since `reset`, from forward hooks on `model.get_decoder()`."""

    def __init__(self, model, device):
        self.device, self.seconds, self.tokens, self.started = device, 0.0, 0, 0.0
        decoder = model.get_decoder()
        decoder.register_forward_pre_hook(self._start, with_kwargs=True)
        decoder.register_forward_hook(self._stop)

    def reset(self) -> None:
        self.seconds, self.tokens = 0.0, 0

    def _start(self, module, args, kwargs) -> None:
        tokens = kwargs.get("inputs_embeds")
        tokens = kwargs.get("input_ids") if tokens is None else tokens
        self.tokens += tokens.shape[0] * tokens.shape[1]
        sync(self.device)
        self.started = time.perf_counter()

    def _stop(self, module, args, output) -> None:
        sync(self.device)
        self.seconds += time.perf_counter() - self.started


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
    language_model = {name: [] for name in runs}  # (seconds, tokens) per round
    clock = LanguageModelClock(model, device)
    for repeat in range(args.repeats + 1):
        for name, (prefill, processors) in runs.items():
            pnd.detach(model)
            pnd.attach(model, prefill=prefill)
            sync(device)
            clock.reset()
            start = time.perf_counter()
            generate(model, inputs, processors, 1, do_sample=False)
            sync(device)
            if repeat:  # the first round is a warm-up
                times[name].append(time.perf_counter() - start)
                language_model[name].append((clock.seconds, clock.tokens))
    plain = times["plain generate"]
    lines = [f"{hardware(device)}, {args.dtype}, random {args.arch} ({args.size} shape), {inputs['input_ids'].shape[1]}-token "
             f"prompt with a {args.frames}-frame video (14 text tokens before it, 24 after); one generated token; "
             f"{args.repeats} rounds, each running every variant once in a row; ratio: the median over rounds of "
             "the variant's time over plain's in that round (drifts of the machine between rounds cancel out). "
             "Language model: its calls' time (median ms; ratio to plain's, median over rounds) and tokens; the rest: "
             "the call's time outside them (median ms).", "",
             "| prefill | median ms | ratio to plain | lowest-highest ratio of a round | language model: ms, ratio, "
             "tokens (ratio) | the rest: ms |", "|---|---|---|---|---|---|"]
    plain_model = language_model["plain generate"]
    for name, seconds in times.items():
        ratios = [s / p for s, p in zip(seconds, plain)]
        model_seconds = [t for t, _ in language_model[name]]
        model_ratio = statistics.median(t / p for t, (p, _) in zip(model_seconds, plain_model))
        tokens = language_model[name][0][1]
        rest = statistics.median(s - t for s, t in zip(seconds, model_seconds))
        lines.append(f"| {name} | {statistics.median(seconds) * 1e3:.0f} | {statistics.median(ratios):.3f}x | "
                     f"{min(ratios):.3f}-{max(ratios):.3f} | {statistics.median(model_seconds) * 1e3:.0f}, "
                     f"{model_ratio:.3f}x, {tokens} ({tokens / plain_model[0][1]:.3f}x) | {rest * 1e3:.0f} |")
    print("\n".join(lines))
    if args.out:
        write_section(Path(args.out), f"Prior prefill: packed or its own call; {args.arch}, {args.size}, {hardware(device)}",
                      "\n".join(lines))
    return {name: statistics.median(seconds) for name, seconds in times.items()}


if __name__ == "__main__":
    main()
