"""`pnd retrieve`: rank captions for videos (and videos for captions) with prior-normalized scores.

    pnd retrieve videos/ --captions captions.jsonl --model llava-hf/llava-onevision-qwen2-7b-ov-hf \
        --alpha 0.9 --out results/ [--first-stage sims.npy --top-k 10 --fuse 0.0] [--plot]

Captions: a .txt file (one per line; with --aligned the i-th caption belongs to the i-th video) or a
.jsonl file of {"caption": ..., "video": file name} (the "video" field gives the ground truth).
Writes scores.pt, rankings.jsonl and metrics.md (with ground truth) into --out.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from ..extras import pyplot
from ..logits_processor import check_alpha_and_prior
from ..ranking import dual_softmax, inverted_softmax, rerank, retrieval_metrics, sinkhorn
from ..video import VideoReadError, list_videos, read_video
from .launch import Launch, pick_device


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
    parser.add_argument("--device", default="auto", help="auto (default: this process's GPU if any, else cpu), cpu, cuda:0 ...")
    parser.add_argument("--load-in-4bit", action="store_true")
    parser.add_argument("--load-in-8bit", action="store_true")
    parser.add_argument("--out", default="pnd_retrieval")
    parser.add_argument("--plot", action="store_true", help="save scores.png: matrices and prior vs caption length")


def fail(message: str):
    raise SystemExit(f"pnd retrieve: {message}")


def read_captions(path: Path) -> tuple[list[str], list[str | None]]:
    """(captions, ground-truth video name or None for each caption); a bad line is named by its number."""
    if not path.is_file():
        fail(f"--captions {path}: no such file.")
    captions, videos = [], []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                row = json.loads(line)
                caption, video = row["caption"], row.get("video")
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                fail(f"{path}, line {number} is not a JSON object with a 'caption' ({type(error).__name__}: {error}).")
        else:
            caption, video = line.strip(), None
        if not isinstance(caption, str) or not caption.strip():
            fail(f"{path}, line {number}: the caption {caption!r} is empty; give it words or remove the line.")
        captions.append(caption)
        videos.append(video)
    if not captions:
        fail(f"--captions {path} holds no caption.")
    return captions, videos


def load_first_stage(path: str, shape: tuple[int, int]) -> torch.Tensor:
    """The first-stage (videos x captions) similarities, checked: 2-D, numbers, finite, one row per listed video."""
    import numpy as np

    try:
        matrix = torch.from_numpy(np.load(path)) if path.endswith(".npy") else torch.load(path)
    except Exception as error:  # numpy and torch raise many types for missing or foreign files
        fail(f"--first-stage {path} cannot be read ({type(error).__name__}: {error}); give a .npy or .pt file "
             "holding one (videos x captions) matrix.")
    if not torch.is_tensor(matrix) or matrix.dtype == torch.bool or matrix.is_complex() or matrix.dim() != 2:
        what = f"a {tuple(matrix.shape)} {matrix.dtype} tensor" if torch.is_tensor(matrix) else type(matrix).__name__
        fail(f"--first-stage {path} holds {what}; it must be a 2-D matrix of real numbers (videos x captions).")
    if tuple(matrix.shape) != shape:
        fail(f"--first-stage {path} is {tuple(matrix.shape)}; it must be {shape}: one row per listed video (in the "
             "order pnd lists them, broken ones included) and one column per caption.")
    matrix = matrix.float()
    if not torch.isfinite(matrix).all():
        fail(f"--first-stage {path} has {int((~torch.isfinite(matrix)).sum())} NaN or infinite value(s); fix them.")
    return matrix


def check_arguments(args) -> None:
    for name in ("batch_size", "frames", "top_k"):
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}.")
    if args.load_in_4bit and args.load_in_8bit:
        fail("choose one of --load-in-4bit and --load-in-8bit.")
    try:
        check_alpha_and_prior(args.alpha, "masked")
    except ValueError as error:
        fail(str(error))
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file; --out is the folder pnd writes scores.pt, rankings.jsonl and metrics.md into.")
    existing = next(p for p in [out, *out.parents] if p.exists())
    if not os.access(existing, os.W_OK) or not existing.stat().st_mode & 0o222:
        fail(f"--out {out}: {existing} is read-only; pick a writable folder.")


def run(args) -> int:
    check_arguments(args)
    captions, caption_videos = read_captions(Path(args.captions))
    paths = list_videos(args.videos)
    if args.aligned and len(paths) != len(captions):
        fail(f"--aligned pairs the i-th caption with the i-th video, but there are {len(captions)} caption(s) and "
             f"{len(paths)} video(s).")
    first = load_first_stage(args.first_stage, (len(paths), len(captions))) if args.first_stage else None
    launch = Launch.from_env()
    launch.start()
    try:
        rows = score_rows(args, paths, launch.shard(list(range(len(paths)))), captions, first, launch.local_rank)
        if launch.world_size > 1:
            rows = gather_rows(Path(args.out), rows, launch)
            if rows is None:
                return 0
        if not len(rows["index"]):
            print("pnd retrieve: no readable video", file=sys.stderr)
            return 1
        return report(args, paths, captions, caption_videos, rows)
    finally:
        launch.stop()


def score_rows(args, paths: list[Path], indices: list[int], captions: list[str], first, local_rank: int) -> dict:
    """Score matrix rows of the listed videos `indices`: {"index": the readable ones, matrices..., "failed", "lengths"}."""
    from ..loading import load_model
    from ..scoring import CaptionScorer

    videos, failed = [], []
    for i in indices:
        try:
            videos.append((i, read_video(paths[i], args.frames)))
        except VideoReadError as error:
            print(f"pnd retrieve: skipped {error}", file=sys.stderr)
            failed.append(str(paths[i]))
    kept = torch.tensor([i for i, _ in videos], dtype=torch.long)
    keys = ("normalized", "first_stage") if first is not None else ("normalized", "conditional", "prior")
    rows = {"index": kept, "failed": failed, "lengths": None, **{k: torch.empty(0, len(captions)) for k in keys}}
    if not videos:
        return rows
    model, processor = load_model(args.model, pick_device(args.device, local_rank), load_in_4bit=args.load_in_4bit,
                                  load_in_8bit=args.load_in_8bit)
    scorer = CaptionScorer(model, processor, alpha=args.alpha, reduction=args.reduction, prompt=args.prompt,
                           batch_size=args.batch_size, progress=True)
    clips = [v for _, v in videos]
    rows["lengths"] = [len(scorer.caption_ids(c)) for c in captions]
    if first is not None:
        def score_fn(query, chosen):
            return scorer.score([clips[query]], [captions[c] for c in chosen])[0]
        rows.update(normalized=rerank(first[kept], args.top_k, score_fn, args.fuse), first_stage=first[kept])
    else:
        rows.update(scorer.score(clips, captions, return_parts=True)._asdict())
    return rows


def gather_rows(out: Path, rows: dict, launch) -> dict | None:
    """Every rank's rows, in the listed order, on rank 0 (None on the others): part files in --out, a barrier."""
    out.mkdir(parents=True, exist_ok=True)
    torch.save(rows, out / f"scores.part-{launch.rank:05d}.pt")
    launch.barrier()
    if launch.rank != 0:
        return None
    parts = [out / f"scores.part-{rank:05d}.pt" for rank in range(launch.world_size)]
    loaded = [torch.load(p) for p in parts]
    index = torch.cat([r["index"] for r in loaded])
    order = index.argsort()
    merged = {k: torch.cat([r[k] for r in loaded])[order] for k in rows if torch.is_tensor(rows[k])}
    merged["failed"] = [f for r in loaded for f in r["failed"]]
    merged["lengths"] = next((r["lengths"] for r in loaded if r["lengths"] is not None), None)
    for p in parts:
        p.unlink()
    return merged


def report(args, paths: list[Path], captions: list[str], caption_videos: list, rows: dict) -> int:
    """Write scores.pt, rankings.jsonl, metrics.md (and scores.png) from the rows of every readable video."""
    kept, failed = rows["index"], rows["failed"]
    names = [paths[i].name for i in kept.tolist()]
    matrices = {k: v for k, v in rows.items() if k not in ("index", "failed", "lengths")}
    normalized = matrices["normalized"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
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
    targets = kept if args.aligned else ground_truth(names, caption_videos)
    if targets is not None:
        table = metrics_table(matrices, targets, args.alpha)
        if "conditional" in matrices:
            table += "\n\n" + text_to_video_table(matrices["conditional"], targets)
        (out / "metrics.md").write_text(table + "\n")
        print(table)
    if args.plot and "conditional" in matrices:
        plot(matrices, rows["lengths"], out / "scores.png")
    print(f"pnd retrieve: wrote {out}/scores.pt, rankings.jsonl" + (", metrics.md" if targets is not None else ""))
    return 1 if failed else 0


def ground_truth(names, caption_videos) -> torch.Tensor | None:
    """Index of the ground-truth caption of each video (video->text) from the captions' "video" fields, or None."""
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
