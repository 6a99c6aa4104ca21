"""`bench_decode.py`'s parts on one model built once, each table written to OUTDIR as soon as it is measured, so that
a run cut at its time limit keeps every part that ended (what `gpu_check.sh` runs on a lent GPU).

    python benchmarks/gpu_parts.py OUTDIR --parts peers,vcd,m3id,static,modes --size 7b --device cuda --dtype bfloat16

Before the parts, pnd's greedy tokens are compared with the naive recompute's, as `bench_decode.py` does (in bf16:
the two agreements, pnd's and the floor's); here a float32 difference is written down too instead of stopping the run.
Part 2 (modes) runs `--modes-repeats` runs of `--modes-tokens` tokens per method and mode, after a warm-up run of each.
Each part writes `OUTDIR/<arch>_<part>.md`, or the traceback of its failure.
"""

import argparse
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import torch
from bench_decode import METHOD_NAMES, check_tokens, method_peers, modes, peers, static_cache
from prompts import video_inputs
from reporting import hardware, report, static_report
from shapes import ARCHS, SIZES, build_model

import pnd

PARTS = ("peers", *METHOD_NAMES, "static", "modes")


def part_table(part: str, model, inputs, unconditional, args, device) -> str:
    """One part's table, as `bench_decode.py` prints it."""
    if part == "peers":
        return report(model, inputs, args, device, peers(model, inputs, unconditional, args, device), [])
    if part in METHOD_NAMES:
        method = SimpleNamespace(**{**vars(args), "method": part})
        rows, same = method_peers(model, inputs, unconditional, method, device)
        return report(model, inputs, method, device, rows, [], same)
    if part == "static":
        return static_report(model, inputs, args, device, *static_cache(model, inputs, args, device))
    return report(model, inputs, args, device, [], *modes(model, args, device))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--arch", choices=ARCHS, default="llava_onevision")
    parser.add_argument("--size", choices=list(SIZES), default="7b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--modes-tokens", type=int, default=12, help="new tokens per run of part 2")
    parser.add_argument("--modes-repeats", type=int, default=3, help="runs per method and mode of part 2")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    if unknown := sorted(set(parts) - set(PARTS)):
        parser.error(f"unknown parts {unknown}: choose among {', '.join(PARTS)}")
    settings = SimpleNamespace(**vars(args), naive_tokens=4, modes_frames=8, static="with",
                               compile_backend="inductor", method="cpn")
    args.out.mkdir(parents=True, exist_ok=True)
    device, start = torch.device(args.device), time.time()
    model = pnd.attach(build_model(args.arch, args.size, device, getattr(torch, args.dtype)))
    inputs, unconditional = video_inputs(model, args.size, args.frames)
    try:
        tokens = check_tokens(model, inputs, 8)
    except AssertionError as difference:  # float32: bench_decode.py stops here
        tokens = f"DIFFERENT: {difference}."
    setup = (f"{args.arch}, {args.size}, {args.dtype}, {hardware(device)}, torch {torch.__version__}; built in "
             f"{time.time() - start:.0f} s; prompt {inputs['input_ids'].shape[1]} tokens. {tokens}")
    print(setup, flush=True)
    for part in parts:
        start = time.time()
        try:
            text = part_table(part, model, inputs, unconditional, settings, device)
        except Exception:  # a part that fails is a finding: the others still run
            text = f"FAILED\n```\n{traceback.format_exc()[-3000:]}\n```"
        peak = f"; peak allocated {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if device.type == "cuda" else ""
        text = f"## {part}\n\n{setup}\n\n{text}\n\n[{part}: {time.time() - start:.0f} s{peak}]\n"
        (args.out / f"{args.arch}_{part}.md").write_text(text)
        print(text, flush=True)


if __name__ == "__main__":
    main()
