"""`pnd retrieve`: rank captions for videos (and videos for captions) with prior-normalized scores.

    pnd retrieve videos/ --captions captions.jsonl --model llava-hf/llava-onevision-qwen2-7b-ov-hf \
        --alpha 0.9 --out results/ [--first-stage sims.npy --top-k 10 --fuse 0.0] [--plot]

Captions: a .txt file (one per line; with --aligned the i-th caption belongs to the i-th video) or a
.jsonl file of {"caption": ..., "video": file name} (the "video" field gives the ground truth).
Writes scores.pt, rankings.jsonl and metrics.md (with ground truth) into --out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from ..extras import pyplot
from ..ranking import dual_softmax, inverted_softmax, rerank, retrieval_metrics, sinkhorn
from ..video import VideoReadError, list_videos, read_video


def add_arguments(parser) -> None:
    parser.add_argument("videos", nargs="+", help="video files, frame folders, or folders of them")
    parser.add_argument("--captions", required=True, help=".txt (one per line) or .jsonl with caption/video")
    parser.add_argument("--model", required=True, help="Hugging Face id or local folder")
    parser.add_argument("--alpha", type=float, default=0.9)
    parser.add_argument("--reduction", choices=["mean", "sum"], default="mean")
    parser.add_argument("--prompt", default="Describe the video.")
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--aligned", action="store_true", help="the i-th caption of a .txt belongs to the i-th video")
    parser.add_argument("--first-stage", help="first-stage similarities (videos x captions), .npy or .pt")
    parser.add_argument("--top-k", type=int, default=10, help="candidates reranked per video with --first-stage")
    parser.add_argument("--fuse", type=float, default=0.0, help="weight of the first-stage similarity added")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--load-in-4bit", action="store_true")
    parser.add_argument("--load-in-8bit", action="store_true")
    parser.add_argument("--out", default="pnd_retrieval")
    parser.add_argument("--plot", action="store_true", help="save scores.png: matrices and prior vs caption length")


def read_captions(path: Path) -> tuple[list[str], list[str | None]]:
    """(captions, ground-truth video name or None for each caption)."""
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r["caption"] for r in rows], [r.get("video") for r in rows]
    captions = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return captions, [None] * len(captions)


def load_first_stage(path: str) -> torch.Tensor:
    if path.endswith(".npy"):
        import numpy as np

        return torch.from_numpy(np.load(path)).float()
    return torch.load(path).float()


def run(args) -> int:
    from ..loading import load_model
    from ..scoring import CaptionScorer

    captions, caption_videos = read_captions(Path(args.captions))
    paths, videos, failed = list_videos(args.videos), [], []
    for path in paths:
        try:
            videos.append((path, read_video(path, args.frames)))
        except VideoReadError as error:
            print(f"pnd retrieve: skipped {error}", file=sys.stderr)
            failed.append(path)
    if not videos:
        print("pnd retrieve: no readable video", file=sys.stderr)
        return 1
    names = [p.name for p, _ in videos]
    model, processor = load_model(args.model, args.device, load_in_4bit=args.load_in_4bit, load_in_8bit=args.load_in_8bit)
    scorer = CaptionScorer(model, processor, alpha=args.alpha, reduction=args.reduction, prompt=args.prompt,
                           batch_size=args.batch_size, progress=True)
    clips = [v for _, v in videos]
    if args.first_stage:
        first = load_first_stage(args.first_stage)[[paths.index(p) for p, _ in videos]]

        def score_fn(query, chosen):
            return scorer.score([clips[query]], [captions[c] for c in chosen])[0]
        normalized = rerank(first, args.top_k, score_fn, args.fuse)
        matrices = {"normalized": normalized, "first_stage": first}
    else:
        parts = scorer.score(clips, captions, return_parts=True)
        matrices = parts._asdict()
        normalized = parts.normalized

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save({**matrices, "videos": names, "captions": captions, "alpha": args.alpha}, out / "scores.pt")
    with open(out / "rankings.jsonl", "w") as f:
        for name, row in zip(names, normalized):
            order = [i for i in row.argsort(descending=True).tolist() if torch.isfinite(row[i])][:10]
            top = [{"caption_index": i, "caption": captions[i], "score": float(row[i])} for i in order]
            f.write(json.dumps({"video": name, "ranking": top}) + "\n")
    targets = ground_truth(names, captions, caption_videos, args.aligned)
    if targets is not None:
        table = metrics_table(matrices, targets, args.alpha)
        if "conditional" in matrices:
            table += "\n\n" + text_to_video_table(matrices["conditional"], targets)
        (out / "metrics.md").write_text(table + "\n")
        print(table)
    if args.plot and "conditional" in matrices:
        plot(matrices, [len(scorer.caption_ids(c)) for c in captions], out / "scores.png")
    print(f"pnd retrieve: wrote {out}/scores.pt, rankings.jsonl" + (", metrics.md" if targets is not None else ""))
    return 1 if failed else 0


def ground_truth(names, captions, caption_videos, aligned) -> torch.Tensor | None:
    """Index of the ground-truth caption of each video (video->text), or None when unknown."""
    if aligned:
        return torch.arange(len(names)) if len(names) == len(captions) else None
    index = {}
    for c, video in enumerate(caption_videos):
        if video is not None:
            index.setdefault(Path(video).name, c)
    if not all(n in index for n in names):
        return None
    return torch.tensor([index[n] for n in names])


def metrics_table(matrices: dict, targets: torch.Tensor, alpha: float) -> str:
    rows = []
    if "conditional" in matrices:
        rows.append(("likelihood log P(t|v) (alpha=0)", matrices["conditional"]))
        rows.append((f"prior-normalized (alpha={alpha})", matrices["normalized"]))
        rows.append(("prior-normalized + inverted softmax", inverted_softmax(matrices["normalized"].T).T))
        rows.append(("prior-normalized + dual softmax", dual_softmax(matrices["normalized"].T).T))
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
