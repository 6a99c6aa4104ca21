"""Decoding cost of prior normalization, as ratios to plain `generate` measured in one run.

    .venv/bin/python benchmarks/bench_decode.py --out benchmarks/RESULTS.md          # CPU, ~8 min on 2 cores
    python benchmarks/bench_decode.py --size 7b --device cuda --dtype bfloat16 [--arch qwen2_vl]   # GPU
    python benchmarks/bench_decode.py --arch qwen3_vl|qwen3_5|qwen4_exp|nemotron_h_omni --size 7b --device cuda \
        --dtype bfloat16
    .venv/bin/python benchmarks/bench_decode.py --method vcd|icd|m3id|pai|only|vista --static skip --modes-frames 0

Models have random weights and are built offline from a real architecture's config: `--size cpu` is
LLaVA-OneVision (SigLIP + a 154 M-parameter Qwen2 decoder), `7b` the LLaVA-OneVision-7B / Qwen2-VL-7B
shapes, `tiny` a seconds-long smoke run for the tests, `small` a 384-wide, 6-layer decoder whose steps are short
enough for a fixed per-step cost to show (`--static only`). One video prompt (text, `--frames` frames, text).
`--arch qwen3_vl` (7b: Qwen3-VL-8B-Instruct) and `--arch qwen3_5` (7b: Qwen3.5-9B, a hybrid decoder: three Gated
DeltaNet layers per full-attention layer) write the video as their processor does: per frame a timestamp
(`<0.5 seconds>`, 4 text tokens here) and `<|vision_start|>` + the frame's placeholders + `<|vision_end|>`, all
inside the template's `<|vision_start|>…<|vision_end|>`. `--arch qwen4_exp` (Gated DeltaNet and indexed attention,
MoE) writes the same. `--arch nemotron_h_omni` (7b: Nemotron-H-8B's Mamba-2 / attention decoder, 8.8 B parameters with
its RADIO tower) builds its prompts with its own processor (a locally built tokenizer, one video per call, rows
left-padded together). The hybrids have no static-cache part (pnd's static cache holds attention layers only).

Part 1 (greedy, batch 1) compares, on the same model and inputs:
  plain        model.generate
  plain, 2 rows  model.generate on the prompt twice (batch 2): what one more row costs on this hardware,
               the floor of any method that runs its second pass in the same batched call
  pnd          pnd.PriorNormalized: conditioned and prior rows in one call per step (pnd has no sequential path)
  cfg          transformers' UnbatchedClassifierFreeGuidanceLogitsProcessor on the text-only prompt
               (a second model call per step with its own cache)
  mitigv VCD   mitigv's VCD: its own decoding loop, a second forward on distorted frames per step
               (LLaVA models; skipped when mitigv is not installed: pip install -e ".[bench]")
  naive        the masked prior recomputed from scratch at every step (no cache)
`--method vcd|icd|m3id|pai|only|vista` (docs/methods.md; default cpn, the rows above): part 1 is plain, plain on 2 rows, pnd's method
(`pnd.decoding.methods`, the paper's defaults) and mitigv's same method where it runs (LLaVA models, via
`build_mitigator`; VCD with seed 0, the noise pnd's seed 0 draws; ICD at lam 0.5, the prior form that ranks as the
paper's alpha 1; M3ID at its defaults), with a line saying whether their greedy tokens are the same. ICD's contrast
prompt is the prompt with 20 random "instruction" tokens after the video; M3ID's unconditioned prompt is the text
without the video. Parts 2 and 3 measure cpn: skipped with another method.
Part 2: plain, plain on 2 rows per prompt, and pnd for greedy, beam search (4 beams) and sampling, at batch 1
and 8 (`--modes-frames`). Each mode is timed on its own, after a warm-up run of each method at full length (a mode's
first steps at its batch shape, allocations and kernel choices, are not timed), with `--modes-repeats` runs (default
`--repeats`) of `--modes-tokens` tokens per method (on an H100 at 7B, one run after a 2-token warm-up timed plain
greedy at 76 ms per token at batch 1 and 28.5 ms at batch 8: `gpu_parts.py` runs 3). Part 2 decodes eagerly (a dynamic
cache), and the clock, a logits processor, runs in generate's own loop, outside the model's forward, the only part
generate compiles.
Part 3 (`--static with|only|skip`): greedy, batch 1, part 1's prompt, by cache: the default dynamic cache (the prompt
as is, and padded: one more slot of left padding, so that `generate` hands plain rows a mask at every step, as a
batch's rows get), and `cache_implementation="static"`, eager and compiled (generate's `compile_config`: inductor, its
defaults): plain, plain on 2 rows, pnd, and pnd's fixed cost per step over two plain rows for each; pnd's compiled
tokens are checked equal to the naive recompute's first. Eager is `disable_compile=True`: without it, generate on
CUDA compiles a static cache's decoding steps with its default `compile_config`.

Per token: the median time between decoding steps (a last logits processor records when each step's
scores are ready; for mitigv, its per-step sampler); prefill: the time to the first step's scores, best
of `--repeats` and 3 more 1-token runs. Methods are timed round-robin. Peak memory: CUDA's max_memory_allocated, on CPU the peak resident
set (VmHWM) of one more run.
Before anything is timed, pnd's greedy tokens are checked equal to the naive recompute's (`check_tokens`). In bf16 or
fp16, rounding alone can flip a near-tie of a random model's flat logits: the check then reports, instead of stopping
the benchmark, two agreements (generated tokens equal before the first difference): pnd against the naive recompute,
and plain `generate` against a plain recompute without a cache, the floor of bf16's own noise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from baselines import ALPHA, TEXT_ONLY, NaivePrior, check_tokens, icd_contrast, mitigv_method, mitigv_vcd
from prompts import video_inputs
from reporting import against_the_floor, hardware, report, static_report
from results import write_section
from shapes import ARCHS, SIZES, build_model
from timing import Failed, Measured, generate, measure_all, sync
from transformers import CompileConfig
from transformers.generation.logits_process import UnbatchedClassifierFreeGuidanceLogitsProcessor

import pnd
from pnd.architectures.layers import layer_plan
from pnd.decoding.methods import method

# What the tests and other scripts use from here (bench_decode.main, build_model, ...), some of it defined in the
# sibling modules.
__all__ = ["ALPHA", "ARCHS", "build_model", "check_tokens", "generate", "hardware", "main", "method_peers", "modes",
           "peers", "report", "static_cache", "static_report", "sync", "video_inputs"]

METHOD_NAMES = ("vcd", "icd", "m3id", "pai", "only", "vista")  # `--method`: pnd's other methods (docs/methods.md)


def method_peers(model, inputs, unconditional, args, device) -> tuple[list[tuple[str, dict]], str]:
    """Part 1 for `args.method` (vcd, icd, m3id, pai, only, vista): plain, plain on 2 rows, pnd's method and mitigv's;
    and a note saying whether pnd's and mitigv's greedy tokens are the same, and where pnd's method stands against
    plain on 2 rows and mitigv's (`against_the_floor`)."""
    doubled = {k: torch.cat([v, v]) for k, v in inputs.items()}
    extra = {"prior_inputs": icd_contrast(inputs)} if args.method == "icd" else {}
    label = args.method.upper()
    # the paper's settings; PAI from layer 0 on a model of 2 layers (--size tiny), which has no layer 2
    settings = {"start_layer": 0} if args.method == "pai" and model.config.get_text_config().num_hidden_layers <= 2 else {}
    runs = {
        "plain": lambda n, clock: generate(model, inputs, [], n, clock, do_sample=False),
        "plain, 2 rows": lambda n, clock: generate(model, doubled, [], n, clock, do_sample=False),
        f"pnd {label}": lambda n, clock: generate(model, inputs, [method(args.method).processor(**settings)], n, clock,
                                                  do_sample=False, **extra),
        f"mitigv {label}": mitigv_method(model, inputs, args.method, unconditional if args.method in TEXT_ONLY else None,
                                         extra.get("prior_inputs"), **settings),
    }
    if runs[f"mitigv {label}"] is None:
        print(f"mitigv {label}: skipped (not installed or not supported for {model.config.model_type})")
        del runs[f"mitigv {label}"]
        same = f"mitigv's {label} did not run."
    else:
        ours = runs[f"pnd {label}"](args.tokens, None)[:, inputs["input_ids"].shape[1]:]
        theirs = runs[f"mitigv {label}"](args.tokens, lambda *a: None)
        same = (f"Greedy tokens of pnd's {label} and mitigv's: {'the same' if torch.equal(ours, theirs) else 'DIFFERENT'} "
                f"({args.tokens} tokens).")
        print(same)
    results = measure_all({name: (run, args.tokens) for name, run in runs.items()}, device, args.repeats)
    for name, result in results.items():
        print(name, result, flush=True)
    floor = against_the_floor(results, label)
    print(floor)
    return list(results.items()), f"{same} {floor}"


def peers(model, inputs, unconditional, args, device) -> list[tuple[str, dict]]:
    doubled = {k: torch.cat([v, v]) for k, v in inputs.items()}
    runs = {
        "plain": lambda n, clock: generate(model, inputs, [], n, clock, do_sample=False),
        "plain, 2 rows": lambda n, clock: generate(model, doubled, [], n, clock, do_sample=False),
        "pnd": lambda n, clock: generate(model, inputs, [pnd.PriorNormalized(ALPHA)], n, clock, do_sample=False),
        "cfg": lambda n, clock: generate(model, inputs, [UnbatchedClassifierFreeGuidanceLogitsProcessor(
            1 - ALPHA, model, unconditional)], n, clock, do_sample=False),
        "mitigv VCD": mitigv_vcd(model, inputs),
        "naive": lambda n, clock: generate(model, inputs, [NaivePrior(model, inputs)], n, clock, do_sample=False),
    }
    for name in [name for name, run in runs.items() if run is None]:
        print(f"{name}: skipped (not installed or not supported for {model.config.model_type})")
        del runs[name]
    timed = {name: (run, min(args.tokens, args.naive_tokens) if name == "naive" else args.tokens)
             for name, run in runs.items()}
    results = measure_all(timed, device, args.repeats)
    for name, result in results.items():
        print(name, result, flush=True)
    return list(results.items())


MODES = {"greedy": dict(do_sample=False), "beam (4)": dict(do_sample=False, num_beams=4),
         "sampling": dict(do_sample=True, top_k=50)}


def modes(model, args, device) -> tuple[list[tuple[str, int, dict]], str]:
    """Part 2: plain, plain on 2 rows and pnd by decoding mode at batch 1 and 8, each mode timed on its own after a
    full-length warm-up run of each method; and the batch-8 token check's sentence."""
    rows, checked = [], ""
    for batch in (1, 8):
        inputs, _ = video_inputs(model, args.size, args.modes_frames, batch)
        if batch > 1:
            checked = check_tokens(model, inputs, 4)
        doubled = {k: torch.cat([v, v]) for k, v in inputs.items()}
        for mode, kwargs in MODES.items():
            runs = {"plain": lambda n, clock: generate(model, inputs, [], n, clock, **kwargs),
                    "plain, 2 rows": lambda n, clock: generate(model, doubled, [], n, clock, **kwargs),
                    "pnd": lambda n, clock: generate(model, inputs, [pnd.PriorNormalized(ALPHA)], n, clock, **kwargs)}
            measured = measure_all({name: (run, args.modes_tokens) for name, run in runs.items()}, device,
                                   args.modes_repeats, warmup=args.modes_tokens)
            rows.append((mode, batch, measured))
            print(mode, batch, measured, flush=True)
    return rows, checked


def static_cache(model, inputs, args, device) -> tuple[list[tuple[str, Measured | Failed]], str]:
    """Part 3: plain, plain on 2 rows and pnd by cache: dynamic (the prompt as is, and with one slot of left padding,
    as a batched evaluation's rows have), static, static and compiled (one cache length for every run: one compile);
    and the token check's sentence (compiled)."""
    compiled = CompileConfig(backend=args.compile_backend)
    compiled._compile_all_devices = device.type != "cuda"  # generate compiles on CUDA-like devices only unless told
    static = dict(cache_implementation="static", max_cache_len=inputs["input_ids"].shape[1] + max(args.tokens, 8))
    # eager: disable_compile, or generate would compile a static cache's steps on CUDA all the same
    settings = {"dynamic": (inputs, {}), "dynamic, padded": (left_padded(inputs), {}),
                "static": (inputs, static | {"disable_compile": True}),
                "static, compiled": (inputs, static | {"compile_config": compiled})}
    checked = check_tokens(model, inputs, 8, **settings["static, compiled"][1])
    processors = {"plain": list, "plain, 2 rows": list, "pnd": lambda: [pnd.PriorNormalized(ALPHA)]}
    runs = {}
    for setting, (prompt, kwargs) in settings.items():
        rows = {"plain": prompt, "plain, 2 rows": {k: torch.cat([v, v]) for k, v in prompt.items()}, "pnd": prompt}
        runs |= {f"{name}, {setting}": (lambda n, clock, i=rows[name], p=made, k=kwargs: generate(
                     model, i, p(), n, clock, do_sample=False, **k), args.tokens) for name, made in processors.items()}
    results = measure_all(runs, device, args.repeats)
    for name, result in results.items():
        print(name, result, flush=True)
    return list(results.items()), checked


def left_padded(inputs: dict) -> dict:
    """The prompt with one more slot of left padding (attention mask 0): `generate` then hands the model a mask at
    every step, as for a batch of prompts of different lengths."""
    ids = inputs["input_ids"]
    return {k: torch.nn.functional.pad(v, (1, 0)) if v.shape == ids.shape else v for k, v in inputs.items()}


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=ARCHS, default="llava_onevision")
    parser.add_argument("--size", choices=list(SIZES), default="cpu")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--naive-tokens", type=int, default=4)
    parser.add_argument("--modes-frames", type=int, default=8, help="frames for part 2 (0 skips part 2)")
    parser.add_argument("--modes-tokens", type=int, default=12)
    parser.add_argument("--modes-repeats", type=int, help="runs per method and mode in part 2 (default: --repeats)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--static", choices=["with", "only", "skip"], default="with",
                        help="part 3, static cache and compiled decoding: with parts 1-2, only it, or skip it")
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend of part 3")
    parser.add_argument("--method", choices=["cpn", *METHOD_NAMES], default="cpn",
                        help="the decoding method of part 1 (parts 2-3: cpn only, skipped with another method)")
    parser.add_argument("--out", help="write the table to this Markdown file (its decoding section)")
    args = parser.parse_args(argv)
    args.modes_repeats = args.modes_repeats or args.repeats

    device = torch.device(args.device)
    model = pnd.attach(build_model(args.arch, args.size, device, getattr(torch, args.dtype)))
    inputs, unconditional = video_inputs(model, args.size, args.frames)
    checked = check_tokens(model, inputs, 8)
    tables = {}
    if args.method != "cpn":
        rows, same = method_peers(model, inputs, unconditional, args, device)
        tables[f"Decoding, {args.method}: {args.arch}, {args.size}, {hardware(device)}"] = report(
            model, inputs, args, device, rows, [], f"{checked} {same}")
        if args.modes_frames or args.static != "skip":
            print("Parts 2-3 skipped: they measure cpn.")
    elif args.static != "only":
        rows = peers(model, inputs, unconditional, args, device)
        mode_rows, modes_checked = modes(model, args, device) if args.modes_frames else ([], "")
        tables[f"Decoding: {args.arch}, {args.size}, {hardware(device)}"] = report(
            model, inputs, args, device, rows, mode_rows, f"{checked} {modes_checked}".rstrip())
    static_part = args.method == "cpn" and args.static != "skip"  # part 3 measures cpn
    if static_part and not layer_plan(model.config.get_text_config(decoder=True)).static:
        print(f"Part 3 skipped: pnd's static cache holds attention layers only, {args.arch} has recurrent or indexed "
              "ones.")
    elif static_part:
        rows, static_checked = static_cache(model, inputs, args, device)
        tables[f"Decoding, static cache and torch.compile: {args.arch}, {args.size}, {hardware(device)}"] = (
            static_report(model, inputs, args, device, rows, f"{checked} {static_checked}"))
    for title, table in tables.items():
        print(table)
        if args.out:
            write_section(Path(args.out), title, table)
    return "\n\n".join(tables.values())


if __name__ == "__main__":
    main()
