"""The bundled demo: what prior normalization does, measured offline on a tiny trained model (`pnd demo`).

The bundled model (`pnd/demo/model`, trained by `tools/train_demo_model.py`) captions clips of a
moving coloured square, "a {size} {colour} square moves across". Its training captions say "red" and
"small" 70% of the time each, and many training clips are drowned in noise, so on unclear clips it
answers "small red". The demo prints plain and normalized captions of the sample videos
(`pnd/demo/videos`), the caption prior pnd measures, and the balanced accuracy (mean per-class recall)
of the colour and size words over a test set uniform over colours x sizes, for each alpha; it saves
a plot of that table.

Example:
    >>> from pnd.demo import balanced_accuracy
    >>> balanced_accuracy(["red", "red", "blue", "blue"], ["red", "red", "red", "blue"])
    0.75
"""

from __future__ import annotations

import itertools
from pathlib import Path

import torch

from ..extras import pyplot

DEMO_MODEL = Path(__file__).with_name("model")
SAMPLE_VIDEOS = Path(__file__).with_name("videos")
ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
ATTRIBUTES = ("colour", "size")
PLAUSIBILITY = 0.1
SAMPLE_ALPHAS = (0.5, 1.0)


def load_demo_model():
    """(model, processor) of the bundled demo model."""
    from ..io.loading import load_model

    return load_model(str(DEMO_MODEL))


def balanced_accuracy(truth: list[str], predicted: list) -> float:
    """Mean over the true classes of the share of their examples predicted right (per-class recall)."""
    classes = sorted(set(truth))
    recalls = [sum(p == c for t, p in zip(truth, predicted) if t == c) / truth.count(c) for c in classes]
    return sum(recalls) / len(recalls)


def uniform_test_set(per_pair: int, noise: float, seed: int = 1000) -> tuple[list[torch.Tensor], list[tuple[str, str]]]:
    """Clips uniform over colours x sizes, `per_pair` of each pair, all at the same noise level."""
    from .colours import COLOURS
    from .moving import SIZES, make_moving_clip

    generator = torch.Generator().manual_seed(seed)
    pairs = [pair for pair in itertools.product(COLOURS, SIZES) for _ in range(per_pair)]
    return [make_moving_clip(c, m, generator, noise) for c, m in pairs], pairs


def evaluate(model, processor, alphas=ALPHAS, per_pair: int = 8, noise: float = 0.85,
             plausibility: float | None = PLAUSIBILITY) -> dict[float, dict[str, float]]:
    """{alpha: {"colour": balanced accuracy, "size": ...}} of greedy captions on `uniform_test_set`.

    alpha 0 is plain decoding; the others use `PriorNormalized(alpha, plausibility=plausibility)`.
    `model` must be attached (`pnd.attach`).
    """
    from ..decoding.captioning import generate_captions

    clips, pairs = uniform_test_set(per_pair, noise)
    return {alpha: accuracies(generate_captions(model, processor, clips, alpha or None, plausibility=plausibility),
                              pairs) for alpha in alphas}


def accuracies(captions: list[str], pairs: list[tuple[str, str]]) -> dict[str, float]:
    """{"colour": balanced accuracy, "size": ...} of the attribute words of `captions` against the clips' `pairs`."""
    from .moving import attributes

    named = [attributes(c) for c in captions]
    return {attribute: balanced_accuracy([p[k] for p in pairs], [n[k] for n in named])
            for k, attribute in enumerate(ATTRIBUTES)}


# each method at the paper's defaults, then at a second strength; the demo model has 2 layers, so PAI from layer 0
DEMO_METHODS = {
    "cpn": ({}, {"alpha": 1.0, "plausibility": PLAUSIBILITY}),
    "vcd": ({}, {"alpha": 0.5}),
    "icd": ({}, {"alpha": 0.5}),
    "m3id": ({}, {"forgetting_rate": 0.2, "gate": 1.0}),
    "pai": ({"start_layer": 0}, {"start_layer": 0, "alpha": 1.0, "gamma": 2.0}),
    "only": ({}, {"layer": 1}),
    "vista": ({}, {"steer_strength": 0.2}),
}


def compare_methods(model, processor, methods, per_pair: int = 8, noise: float = 0.85) -> list[tuple[str, dict]]:
    """[(label, {"colour": balanced accuracy, "size": ...})] of greedy captions on `uniform_test_set`: plain first,
    then each method of `methods` (`DEMO_METHODS`' names) at its two settings. `model` must be attached."""
    from ..decoding.captioning import generate_captions

    clips, pairs = uniform_test_set(per_pair, noise)
    runs = [("plain", None, {})] + [(name, name, settings) for name in methods for settings in DEMO_METHODS[name]]
    return [(name + "".join(f" {k}={v}" for k, v in settings.items()),
             accuracies(generate_captions(model, processor, clips, None, method=method, settings=settings), pairs))
            for name, method, settings in runs]


def prior_shares(model, processor) -> dict[str, dict[str, float]]:
    """The caption prior P(t) pnd measures over all captions, summed per colour and per size."""
    from ..scoring.scorer import CaptionScorer
    from ..testing import random_video
    from .colours import COLOURS
    from .moving import SIZES, moving_caption

    pairs = list(itertools.product(COLOURS, SIZES))
    scorer = CaptionScorer(model, processor, reduction="sum")
    prior = scorer.score([random_video(0, frames=8, size=32)], [moving_caption(c, m) for c, m in pairs],
                         return_parts=True).prior[0].softmax(0)
    return {kind: {name: float(sum(p for (c, m), p in zip(pairs, prior) if (c, m)[k] == name)) for name in names}
            for k, (kind, names) in enumerate(zip(ATTRIBUTES, (COLOURS, SIZES)))}


def markdown(table: dict[float, dict[str, float]] | list[tuple[str, dict]]) -> str:
    """The table of `evaluate` (by alpha) or of `compare_methods` (by method and settings) in markdown."""
    if isinstance(table, dict):
        table = [(f"{a}{' (plain)' if a == 0 else ''}", r) for a, r in table.items()]
        head = "alpha"
    else:
        head = "method"
    lines = [f"| {head} | colour balanced accuracy | size balanced accuracy |", "|---|---|---|"]
    lines += [f"| {label} | {r['colour']:.3f} | {r['size']:.3f} |" for label, r in table]
    return "\n".join(lines)


def plot(table: dict[float, dict[str, float]], path: Path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for attribute in ATTRIBUTES:
        ax.plot(list(table), [r[attribute] for r in table.values()], marker="o", label=attribute)
    ax.set(xlabel="alpha", ylabel="balanced accuracy", ylim=(0, 1), title="pnd demo: uniform test set")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
