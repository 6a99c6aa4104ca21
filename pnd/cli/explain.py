"""`pnd explain`: why did the answer change? Plain and prior-normalized decoding of one video or image, token by token.

    pnd explain clip.mp4 [--prompt "Describe the video."] [--model M] [--alpha 0.5] [--plausibility 0.1] \
        [--method vcd|icd|m3id|pai|only|vista [--method-args noise_step=500]] [--out pnd_explain]

Without --model the bundled demo model answers (offline, seconds). Writes into --out: explain.html (a
self-contained page: each token coloured by how far the prior pushed it down (red) or up (blue) among its
alternatives, the numbers on hover and in a table), explain.png (the same tokens) and explain.json (every
number: `pnd.scoring.explain.Explanation.to_dict()`; a -inf score, cut by the plausibility cut, is null). The
shift of a token is the change of its log-probability when the normalized scores are read as a distribution
(`pnd.scoring.tokens`). With `--method` (docs/methods.md) the second decoding is that method's, at its paper's
settings unless given, and each token's "prior" is the method's contrast (VCD's noised video, ICD's disturbed
instruction, M3ID's and PAI's prompt without the video, ONLY's heads switched off; VISTA's: the prompt without the
video, against the unsteered model, `pnd.scoring.explain`).

Example:
    >>> from pnd.cli import main
    >>> main(["explain", "clip.mp4", "--alpha", "1.0", "--out", "why"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..extras import pyplot
from ..io.video import FRAME_SUFFIXES, read_image
from ..scoring.explain import Explanation
from .method_args import add_method_arguments, method_settings

SCALE = 2.0  # |shift| (nats) shown at full colour
VIEWS = (("plain", "plain decoding"), ("normalized", "prior-normalized decoding"))


def add_arguments(parser) -> None:
    parser.add_argument("visual", help="a video file, a folder of frames, or an image file (png, jpg, ...)")
    parser.add_argument("--prompt", help='the instruction (default "Describe the video." / "Describe the image.")')
    parser.add_argument("--model", help="Hugging Face id or local folder (default: the bundled demo model)")
    parser.add_argument("--alpha", type=float, help="weight of the prior in [0, 1] (default 0.5; another method's: "
                        "its own)")
    parser.add_argument("--plausibility", help="drop tokens below this share of the top token's probability "
                        "(default 0.1; another method's: its own; 'none': off)")
    add_method_arguments(parser)
    parser.add_argument("--frames", type=int, default=8, help="frames sampled uniformly from a video (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=5, help="alternatives listed per token (default 5)")
    parser.add_argument("--out", default="pnd_explain", help="output folder (default pnd_explain)")
    parser.add_argument("--device", default="cpu")


def run(args) -> int:
    from ..decoding.methods import method
    from ..decoding.paired import attach
    from ..demo import DEMO_MODEL
    from ..io.loading import check_device, check_model_source, load_model
    from ..io.prompts import pixel_values_kwargs, video_prompt
    from ..io.video import read_video
    from ..scoring.explain import explain
    from .launch import check_counts
    from .records import file_in_the_way

    try:  # every argument is checked before the model loads or anything is written
        chosen = method(args.method)
        settings = chosen.settings(**method_settings(args, {"alpha": 0.5, "plausibility": 0.1}
                                                     if args.method == "cpn" else {}))
        check_counts(args, ("max_new_tokens", "top_k", "frames"))
        if (blocked := file_in_the_way(Path(args.out) / "explain.json")) is not None:
            raise ValueError(blocked)
        check_device(args.device)
        if args.model:
            check_model_source(args.model)
        path = Path(args.visual)
        is_image = path.is_file() and path.suffix.lower() in FRAME_SUFFIXES
        visual = read_image(path) if is_image else read_video(path, args.frames)
    except (ValueError, OSError) as error:
        raise SystemExit(f"pnd explain: {error}") from error
    modality = "image" if is_image else "video"
    instruction = args.prompt or f"Describe the {modality}."
    model, processor = load_model(args.model or str(DEMO_MODEL), args.device)

    def prompt(text: str):
        return processor(text=[video_prompt(processor, text, modality)], **{f"{modality}s": [visual]},
                         return_tensors="pt", **pixel_values_kwargs(processor))

    try:  # what pnd refuses on this model or input (e.g. PAI's layers on a 2-layer model): one line, exit 1
        inputs = prompt(instruction)
        if args.method == "cpn":
            result = explain(attach(model, processor), processor, inputs, settings["alpha"], prior=settings["prior"],
                             plausibility=settings["plausibility"], max_new_tokens=args.max_new_tokens,
                             top_k=args.top_k)
        else:
            contrast = chosen.contrast_text(instruction, **settings)
            result = explain(attach(model, processor), processor, inputs, method=chosen.processor(**settings),
                             prior_inputs=None if contrast is None else prompt(contrast),
                             max_new_tokens=args.max_new_tokens, top_k=args.top_k)
    except ValueError as error:
        raise SystemExit(f"pnd explain: {error}") from error
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    title = f"{path.name}: {instruction}" + ("" if args.method == "cpn" else f" (normalized: {args.method})")
    record = {"visual": str(path), "prompt": instruction, "model": args.model or "pnd demo model",
              "method": args.method, "settings": settings, **result.to_dict()}
    (out / "explain.json").write_text(json.dumps(record, indent=1, allow_nan=False) + "\n")
    (out / "explain.html").write_text(page(result, title))
    picture(result, title, out / "explain.png")
    label = f"alpha {result.alpha}" if args.method == "cpn" else f"{args.method}: {settings}"
    print(f"plain:      {result.plain_text}\nnormalized: {result.normalized_text}  ({label})")
    print(f"pnd explain: wrote {out}/explain.html, explain.png, explain.json")
    return 0


def colour(shift: float) -> tuple[int, int, int]:
    """Red for a token the prior pushed down, blue for one it pushed up; white when it did not move."""
    strength = min(abs(shift) / SCALE, 1.0)
    fade = int(255 * (1 - 0.75 * strength))
    return (255, fade, fade) if shift < 0 else (fade, fade, 255)


def _numbers(token) -> str:
    lines = [f"log P(w|v) = {token.conditional:.3f}", f"log P(w) = {token.prior:.3f}",
             f"normalized = {token.normalized:.3f}", f"shift = {token.shift:+.3f}"]
    for view, alternatives in token.top.items():
        lines.append(f"top {view}: " + ", ".join(f"{a.text!r} {a.value:.2f}" for a in alternatives))
    return "\n".join(lines)


def page(result: Explanation, title: str) -> str:
    """A self-contained HTML page (inline style, no script, no external resource) of the explanation."""
    rows = []
    for view, label in VIEWS:
        tokens = getattr(result, view)
        spans = "".join(
            f'<span class="token{" parted" if step == result.parted_at else ""}" data-view="{view}" '
            f'data-step="{step}" data-token-id="{t.token_id}" style="background: rgb{colour(t.shift)}" '
            f'title="{html.escape(_numbers(t))}">{html.escape(t.text)}</span>'
            for step, t in enumerate(tokens))
        rows.append(f'<h2>{label}</h2>\n<p class="answer" id="{view}">{spans}</p>')
    parted = "the two decodings agree" if result.parted_at is None else f"they part at step {result.parted_at}"
    table = "".join(
        f"<tr><td>{step}</td>" + "".join(
            f"<td>{html.escape(t.text)}</td><td>{t.conditional:.3f}</td><td>{t.prior:.3f}</td><td>{t.shift:+.3f}</td>"
            if t else "<td></td>" * 4 for t in pair) + "</tr>"
        for step, pair in enumerate(_pairs(result)))
    heads = "".join(f"<th>{v} token</th><th>log P(w|v)</th><th>log P(w)</th><th>shift</th>" for v, _ in VIEWS)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pnd explain: {html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 60em; }}
.answer {{ font-family: monospace; font-size: 1.4em; line-height: 2; }}
.token {{ white-space: pre; padding: 0.15em 0.05em; border: 1px solid #ccc; }}
.token.parted {{ outline: 2px solid black; }}
table {{ border-collapse: collapse; font-size: 0.9em; }} td, th {{ border: 1px solid #ccc; padding: 0.2em 0.5em; }}
td {{ white-space: pre; font-family: monospace; }}
</style></head><body>
<h1>pnd explain</h1>
<p>{html.escape(title)}<br>alpha {result.alpha}, plausibility {result.plausibility}; {parted} (outlined).
Colour: how far the prior pushed each token down (<span style="background: rgb{colour(-SCALE)}">red</span>)
or up (<span style="background: rgb{colour(SCALE)}">blue</span>) among its alternatives
(shift = log_softmax(normalized)[w] - log P(w|v)). Hover a token for its numbers.</p>
{chr(10).join(rows)}
<h2>Numbers</h2>
<table><tr><th>step</th>{heads}</tr>{table}</table>
</body></html>
"""


def _pairs(result: Explanation):
    longest = max(len(result.plain), len(result.normalized))
    return [[tokens[k] if k < len(tokens) else None for tokens in (result.plain, result.normalized)]
            for k in range(longest)]


def picture(result: Explanation, title: str, path: Path, per_line: int = 64) -> None:
    """The page's coloured tokens as a PNG: one block per decoding, `per_line` characters per line.

    Under each token that moved by 0.05 nats or more, its shift.
    """
    plt = pyplot()

    lines = {view: _wrap(getattr(result, view), per_line) for view, _ in VIEWS}
    height = 1.6 * sum(len(v) for v in lines.values()) + 1.2 * len(VIEWS) + 1
    fig, ax = plt.subplots(figsize=(0.095 * per_line + 0.4, 0.3 * height + 0.3))
    ax.set(xlim=(0, per_line + 1), ylim=(height, 0))
    ax.axis("off")
    ax.text(0, 0.5, title + f"  (alpha {result.alpha}; red: pushed down by the prior, blue: pushed up)",
            fontsize=8, va="center")
    row = 0.6
    for view, label in VIEWS:
        row += 1.2
        ax.text(0, row, label, fontsize=10, weight="bold", va="center")
        for line in lines[view]:
            row += 1.2
            for column, step, token in line:
                parted = step == result.parted_at
                box = dict(facecolor=[c / 255 for c in colour(token.shift)], edgecolor="black" if parted else "0.8",
                           linewidth=1.5 if parted else 0.5, pad=2)
                ax.text(column + 0.5, row, token.text.replace("\n", "\\n"), family="monospace", fontsize=11,
                        va="center", bbox=box)
                if abs(token.shift) >= 0.05:
                    ax.text(column + 0.5, row + 0.75, f"{token.shift:+.2f}", fontsize=6, va="center", color="0.3")
            row += 0.4
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _wrap(tokens, per_line: int) -> list[list[tuple[int, int, object]]]:
    """Tokens as lines of (column, step, token), breaking before a token that would pass `per_line`."""
    lines, column = [[]], 0
    for step, token in enumerate(tokens):
        width = len(token.text) + 1.5
        if column and column + width > per_line:
            lines.append([])
            column = 0
        lines[-1].append((column, step, token))
        column += width
    return lines
