"""What `pnd retrieve` writes from the score rows of every readable video: scores.pt, rankings.jsonl, metrics.md and
scores.png.

Example:
    >>> import torch
    >>> print(metrics_table({"first_stage": torch.eye(2), "normalized": torch.eye(2)}, torch.arange(2), alpha=0.9))
    | video->text scores | R@1 | R@5 | R@10 | MedR | MeanR |
    |---|---|---|---|---|---|
    | first stage | 100.0 | 100.0 | 100.0 | 1.0 | 1.00 |
    | reranked, prior-normalized (alpha=0.9) | 100.0 | 100.0 | 100.0 | 1.0 | 1.00 |
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from ..extras import pyplot
from ..scoring.ranking import dual_softmax, inverted_softmax, retrieval_metrics, sinkhorn


def report(args, paths: list[Path], ids: list[str], captions: list[str], truth: list, records: list[dict]) -> int:
    """Write scores.pt, rankings.jsonl, metrics.md (and scores.png) from the rows of every readable video."""
    by_id = {r["id"]: r for r in records}
    kept = [i for i, id in enumerate(ids) if id in by_id]
    failed = [str(paths[i]) for i, id in enumerate(ids) if id not in by_id]
    if not kept:
        print("pnd retrieve: no readable video", file=sys.stderr)
        return 1
    keys = [k for k in ("normalized", "conditional", "prior", "first_stage") if k in by_id[ids[kept[0]]]]
    matrices = {k: torch.tensor([by_id[ids[i]][k] for i in kept], dtype=torch.float32) for k in keys}
    every_name = video_names(paths)
    names = [every_name[i] for i in kept]
    normalized = matrices["normalized"]
    out = Path(args.out)
    torch.save({**matrices, "videos": names, "captions": captions, "alpha": args.alpha}, out / "scores.pt")
    with open(out / "rankings.jsonl", "w") as f:
        for name, row in zip(names, normalized):
            order = [i for i in row.argsort(descending=True).tolist() if torch.isfinite(row[i])][:10]
            top = [{"caption_index": i, "caption": captions[i], "score": float(row[i])} for i in order]
            f.write(json.dumps({"video": name, "ranking": top}) + "\n")
    if any(torch.isnan(m).any() for m in matrices.values()):
        print(f"pnd retrieve: the model gave NaN scores (see {out}/scores.pt); no metrics. Try another --dtype "
              "or device.", file=sys.stderr)
        return 1
    targets = targets_of([truth[i] for i in kept], names)
    if targets is not None:
        table = metrics_table(matrices, targets, args.alpha)
        if "conditional" in matrices:
            table += "\n\n" + text_to_video_table(matrices["conditional"], targets)
        (out / "metrics.md").write_text(table + "\n")
        print(table)
    if args.plot and "conditional" in matrices:
        plot(matrices, caption_lengths(args.model, captions), out / "scores.png")
    print(f"pnd retrieve: wrote {out}/scores.pt, rankings.jsonl" + (", metrics.md" if targets is not None else ""))
    if failed:
        print(f"pnd retrieve: {len(failed)} video(s) failed and have no rows (a re-run retries them): "
              f"{', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def caption_lengths(model: str, captions: list[str]) -> list[int]:
    """Tokens per caption, as `CaptionScorer` scores them."""
    from transformers import AutoProcessor

    tokenizer = AutoProcessor.from_pretrained(model).tokenizer
    return [len(tokenizer(c, add_special_tokens=False).input_ids) for c in captions]


def video_names(paths: list[Path]) -> list[str]:
    """Each listed video's path from the deepest folder that holds them all: unambiguous, and short."""
    absolute = [os.path.abspath(path) for path in paths]
    root = os.path.commonpath([os.path.dirname(path) for path in absolute])
    return [os.path.relpath(path, root) for path in absolute]


def targets_of(truth: list[int | None], names: list[str]) -> torch.Tensor | None:
    """The ground-truth caption of each scored video; None, said in one line, when one or more have none."""
    missing = [name for name, target in zip(names, truth) if target is None]
    if not missing:
        return torch.tensor(truth)
    shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
    print(f"pnd retrieve: {len(missing)} of the {len(names)} video(s) have no ground-truth caption ({shown}), so no "
          "metrics are computed; give each a caption whose \"video\" names it (or use --aligned).", file=sys.stderr)
    return None


def metrics_table(matrices: dict, targets: torch.Tensor, alpha: float) -> str:
    rows = []
    if "conditional" in matrices:
        rows.append(("likelihood log P(t|v) (alpha=0)", matrices["conditional"]))
        rows.append((f"prior-normalized (alpha={alpha})", matrices["normalized"]))
        rows.append(("prior-normalized + inverted softmax", inverted_softmax(matrices["normalized"])))  # over videos
        rows.append(("prior-normalized + dual softmax", dual_softmax(matrices["normalized"], log_scores=True)))
        rows.append(("prior-normalized + Sinkhorn", sinkhorn(matrices["normalized"])))
    else:
        rows.append(("first stage", matrices["first_stage"]))
        rows.append((f"reranked, prior-normalized (alpha={alpha})", matrices["normalized"]))
    return markdown_table("video->text scores", [(name, retrieval_metrics(s, targets)) for name, s in rows])


def text_to_video_table(conditional: torch.Tensor, targets: torch.Tensor) -> str:
    """Text->video ranks videos by log P(t|v): the caption prior is the same for every video."""
    metrics = retrieval_metrics(conditional[:, targets].T, torch.arange(len(targets)))
    return markdown_table("text->video scores", [("log P(t|v)", metrics)])


def markdown_table(title: str, rows: list[tuple[str, dict]]) -> str:
    lines = [f"| {title} | R@1 | R@5 | R@10 | MedR | MeanR |", "|---|---|---|---|---|---|"]
    for name, m in rows:
        lines.append(f"| {name} | {m['R@1']:.1f} | {m['R@5']:.1f} | {m['R@10']:.1f} | {m['MedR']:.1f} | {m['MeanR']:.2f} |")
    return "\n".join(lines)


def plot(matrices: dict, caption_lengths: list[int], path: Path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, key, title in zip(axes, ("conditional", "normalized"), ("log P(t|v)", "log P(t|v) - alpha log P(t)")):
        image = ax.imshow(matrices[key].numpy(), aspect="auto", cmap="viridis")
        ax.set(title=title, xlabel="caption", ylabel="video")
        fig.colorbar(image, ax=ax)
    axes[2].scatter(caption_lengths, matrices["prior"][0].numpy())
    axes[2].set(title="caption prior vs length", xlabel="caption tokens", ylabel="log P(t)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
