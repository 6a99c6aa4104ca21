"""The Markdown text of a decoding benchmark run: its setup line and tables of ratios to plain `generate`."""

from __future__ import annotations

import re
import statistics

import torch
from timing import Failed


def hardware(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({torch.get_num_threads()} threads)"


def method_table(rows, bases: dict) -> list[str]:
    """Markdown rows of `rows` ([(name, Measured or Failed)]), each with its ratios to `bases[name]`."""
    lines = ["| method | prefill (ms) | prefill ratio | per token (ms) | per-token ratio | peak memory (MB) | peak ratio |",
             "|---|---|---|---|---|---|---|"]
    for name, m in rows:
        if isinstance(m, Failed):
            lines.append(f"| {name} | fails: {m.error} | | | | | |")
            continue
        base = bases[name]
        lines.append(f"| {name} | {m.prefill * 1e3:.1f} | {m.prefill / base.prefill:.2f}x | "
                     f"{m.token * 1e3:.1f} | {m.token / base.token:.2f}x | {m.peak:.0f} | "
                     f"{m.peak / base.peak:.2f}x |")
    return lines


def setup_line(model, args, device, note: str) -> str:
    """The run's setup, then `note` (what the run checked: `check_tokens`' sentences)."""
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    line = (f"{hardware(device)}, torch {torch.__version__}, {args.dtype}; random {model.config.model_type} "
            f"({args.size} shape, {n_params:,.1f} M parameters). {args.repeats} runs per method (per token: median time "
            "between steps; prefill: time to the first step's scores, best of 3 more runs too).")
    return f"{line} {note}" if note else line


def report(model, inputs, args, device, peer_rows, mode_rows, note: str = "") -> str:
    lines = [setup_line(model, args, device, note), "",
             f"Greedy, batch 1, {inputs['input_ids'].shape[1]}-token prompt with a {args.frames}-frame video, "
             f"{args.tokens} new tokens" + (f" (naive: {min(args.tokens, args.naive_tokens)}):" if any(
                 name == "naive" for name, _ in peer_rows) else ":"), ""]
    lines += method_table(peer_rows, {name: peer_rows[0][1] for name, _ in peer_rows})
    if mode_rows:
        lines += ["", f"pnd against plain `generate` by decoding mode ({args.modes_frames}-frame video, "
                  f"{args.modes_tokens} new tokens, {args.modes_repeats} runs per method and mode after a warm-up run; "
                  "batch 8 = 8 prompts of different lengths, left-padded):", "",
                  "| mode | batch | plain prefill (ms) | pnd prefill ratio | plain per token (ms) | pnd per-token ratio | "
                  "plain on 2x rows, per-token ratio | pnd peak-memory ratio |", "|---|---|---|---|---|---|---|---|"]
        for mode, batch, m in mode_rows:
            plain, doubled, ours = m["plain"], m["plain, 2 rows"], m["pnd"]
            failed = next((f for f in (plain, doubled, ours) if isinstance(f, Failed)), None)
            if failed:  # e.g. video + beam search crashes in transformers itself (GLM-4V, Nemotron-H Omni)
                lines.append(f"| {mode} | {batch} | fails: {failed.error} | | | | | |")
                continue
            lines.append(f"| {mode} | {batch} | {plain.prefill * 1e3:.1f} | {ours.prefill / plain.prefill:.2f}x"
                         f" | {plain.token * 1e3:.1f} | {ours.token / plain.token:.2f}x | "
                         f"{doubled.token / plain.token:.2f}x | {ours.peak / plain.peak:.2f}x |")
    return "\n".join(lines)


def static_report(model, inputs, args, device, static_rows, note: str = "") -> str:
    measured = dict(static_rows)
    lines = [setup_line(model, args, device, note), "",
             f"Greedy, batch 1, {inputs['input_ids'].shape[1]}-token prompt with a {args.frames}-frame video, "
             f"{args.tokens} new tokens, with the default dynamic cache (the prompt as is; and padded: one more "
             "slot of left padding, as a batch's rows have) or `cache_implementation=\"static\"`, eager or compiled "
             f"(generate's `compile_config`: {args.compile_backend}, its defaults); each row's ratios are to plain with "
             "the same cache, prompt and compilation:", ""]
    plain = {name: measured[re.sub(r"^(pnd|plain, 2 rows)", "plain", name)] for name in measured}
    lines += method_table(static_rows, plain)
    for setting in ("dynamic", "dynamic, padded", "static", "static, compiled"):
        lines += ["", fixed_cost(measured, setting)]
    return "\n".join(lines)


def fixed_cost(measured: dict, setting: str) -> str:
    """pnd's per-step cost over plain on 2 rows with the same cache and compilation, in ms (issue 47's target: at most
    0.3 ms), from the medians over all runs; then round by round (each round runs both, so that the machine's drifts
    between rounds cancel out): the median of the rounds' differences and of their ratios. A row that failed says so.

    Example:
        >>> from types import SimpleNamespace as Row
        >>> fixed_cost({"pnd, static": Row(token=0.0105, rounds=(0.0105, 0.0206, 0.0104)),
        ...             "plain, 2 rows, static": Row(token=0.01, rounds=(0.01, 0.02, 0.01))}, "static")
        'pnd, static: 0.50 ms per token over plain on 2 rows (10.50 against 10.00 ms); round by round (3 rounds): 0.50 ms, 1.04x.'
    """
    ours, two = (measured.get(f"{name}, {setting}") for name in ("pnd", "plain, 2 rows"))
    if getattr(ours, "token", None) is None or getattr(two, "token", None) is None:
        return f"pnd, {setting}: no fixed cost (a row did not run)."
    line = (f"pnd, {setting}: {(ours.token - two.token) * 1e3:.2f} ms per token over plain on 2 rows "
            f"({ours.token * 1e3:.2f} against {two.token * 1e3:.2f} ms)")
    pairs = list(zip(ours.rounds, two.rounds))
    if not pairs:
        return line + "."
    difference = statistics.median(a - b for a, b in pairs) * 1e3
    return line + f"; round by round ({len(pairs)} rounds): {difference:.2f} ms, {statistics.median(a / b for a, b in pairs):.2f}x."


def against_the_floor(measured: dict, label: str) -> str:
    """Where pnd's method `label` stands in one run's `measured` ({name: Measured or Failed}, `method_peers`' rows):
    its per token and prefill against plain on 2 rows (the floor of a pair run in one batched call; issue 45's targets:
    at most 1.05x per token, VISTA's prefill at most 1.00x), and mitigv's per token over pnd's (target: at least 1.5x)
    and over plain on 2 rows', the most that any batched pair can gain over mitigv on this hardware.

    Example:
        >>> from types import SimpleNamespace as Row
        >>> rows = {"plain, 2 rows": Row(prefill=2.0, token=0.019), "pnd PAI": Row(prefill=1.0, token=0.02)}
        >>> against_the_floor(rows, "PAI")
        "pnd's PAI against plain on 2 rows: per token 1.05x, prefill 0.50x."
        >>> print(against_the_floor({**rows, "mitigv PAI": Row(prefill=1.5, token=0.021)}, "PAI").split(". ")[1])
        mitigv's per token: 1.05x pnd's, 1.11x plain on 2 rows' (what a batched pair can gain at most here).
    """
    two, ours, theirs = (measured.get(name) for name in ("plain, 2 rows", f"pnd {label}", f"mitigv {label}"))
    if getattr(two, "token", None) is None or getattr(ours, "token", None) is None:
        return f"pnd's {label} against plain on 2 rows: a row did not run."
    line = (f"pnd's {label} against plain on 2 rows: per token {ours.token / two.token:.2f}x, prefill "
            f"{ours.prefill / two.prefill:.2f}x.")
    if getattr(theirs, "token", None) is None:
        return line
    return line + (f" mitigv's per token: {theirs.token / ours.token:.2f}x pnd's, {theirs.token / two.token:.2f}x plain "
                   "on 2 rows' (what a batched pair can gain at most here).")
