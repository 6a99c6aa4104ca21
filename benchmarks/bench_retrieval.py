"""Retrieval throughput: CaptionScorer against the naive way (two full forwards per pair), in one run.

    .venv/bin/python benchmarks/bench_retrieval.py [--videos 8] [--captions 64] [--naive-pairs 16]

Model: a random LLaVA-OneVision with a 512-wide, 8-layer Qwen2 decoder (built offline); 32-frame videos
(129 visual tokens each: as in real video prompts, the visual tokens outnumber the caption's).
The naive way builds each (video, caption) sequence and runs a conditioned and a visual-masked forward
over all of it; it is timed on the first `--naive-pairs` pairs (its cost per pair does not depend on
how many pairs there are) and its scores are checked against the scorer's on those pairs.

Memory: for each batch size of `--memory-batches`, a fresh process scores one video against that many
captions in one batch and reports its peak resident memory (ru_maxrss), with the captions packed in one
row over the shared prefix (what SDPA models run) and with one row per caption over copies of the prefix's
KV (what eager and sliding-window models run; forced here on the same SDPA model). On a GPU (`--device cuda`)
the peak is torch.cuda.max_memory_allocated.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch
from results import write_section

import pnd
from pnd.testing import random_video, tiny_model

ALPHA = 0.9
WORDS = "a red blue green yellow circle square triangle star moves left right up down the video shows".split()


@torch.no_grad()
def naive_score(model, scorer, video, caption):
    inputs = scorer.build_inputs(video, caption)
    start, end = inputs.caption_span
    ids = inputs["input_ids"]
    positions = pnd.decoding.prior.default_position_ids(model, **inputs)
    visual = torch.isin(ids, torch.tensor([model.config.image_token_id, model.config.video_token_id]))
    sums = []
    for mask in (inputs["attention_mask"], inputs["attention_mask"] * ~visual):
        logits = model(**{**inputs, "attention_mask": mask}, position_ids=positions).logits[0, start - 1 : end - 1]
        sums.append(torch.log_softmax(logits.float(), -1).gather(1, ids[0, start:end, None]).sum())
    return (sums[0] - ALPHA * sums[1]) / (end - start)


def build_model(device: str = "cpu"):
    model, processor = tiny_model("llava_onevision", hidden_size=512, intermediate_size=2048, num_hidden_layers=8,
                                  num_attention_heads=8, num_key_value_heads=4)
    return model.to(device), processor


def random_captions(count: int) -> list[str]:
    generator = torch.Generator().manual_seed(0)
    return [" ".join(WORDS[i] for i in torch.randint(len(WORDS), (int(n),), generator=generator))
            for n in torch.randint(4, 16, (count,), generator=generator)]


def measure_peak(batch: int, layout: str, device: str) -> float:
    """Peak memory (MB) of a process that scores one 32-frame video against `batch` captions in one batch."""
    model, processor = build_model(device)
    scorer = pnd.CaptionScorer(model, processor, alpha=ALPHA, batch_size=batch, pack_captions=layout == "packed")
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    scorer.score([random_video(0, frames=32)], random_captions(batch))
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_table(batches: list[int], device: str) -> str:
    lines = ["| captions per batch | packed in one row, MB | one row per caption, MB |", "|---|---|---|"]
    for batch in batches:
        peaks = [subprocess.run([sys.executable, __file__, "--measure-peak", str(batch), "--layout", layout,
                                 "--device", device], capture_output=True, text=True, check=True).stdout.split()[-1]
                 for layout in ("packed", "rows")]
        lines.append(f"| {batch} | {float(peaks[0]):.0f} | {float(peaks[1]):.0f} |")
    what = "torch.cuda.max_memory_allocated" if device.startswith("cuda") else "peak resident memory of the process"
    return f"One 32-frame video, {what}, same model as above.\n\n" + "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--videos", type=int, default=8)
    parser.add_argument("--captions", type=int, default=64)
    parser.add_argument("--naive-pairs", type=int, default=16)
    parser.add_argument("--memory-batches", default="1,16,64", help="captions per batch for the memory table ('' skips)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--measure-peak", type=int, help=argparse.SUPPRESS)  # the memory table's child processes
    parser.add_argument("--layout", default="packed", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help="write the table to this Markdown file (its retrieval section)")
    args = parser.parse_args()
    if args.measure_peak:
        print(measure_peak(args.measure_peak, args.layout, args.device))
        return

    model, processor = build_model()
    captions = random_captions(args.captions)
    videos = [random_video(i, frames=32) for i in range(args.videos)]
    scorer = pnd.CaptionScorer(model, processor, alpha=ALPHA, reduction="mean", batch_size=32)

    start = time.perf_counter()
    scores = scorer.score(videos, captions)
    scorer_time = time.perf_counter() - start
    pairs = [(v, c) for v in range(args.videos) for c in range(args.captions)][: args.naive_pairs]
    start = time.perf_counter()
    naive = torch.stack([naive_score(model, scorer, videos[v], captions[c]) for v, c in pairs])
    naive_time = time.perf_counter() - start
    ours = torch.stack([scores[v, c] for v, c in pairs])
    assert torch.allclose(ours, naive, atol=1e-4), "scorer and naive scores differ"

    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    scorer_rate, naive_rate = args.videos * args.captions / scorer_time, len(pairs) / naive_time
    table = "\n".join([
        f"CPU ({torch.get_num_threads()} threads); random LLaVA-OneVision {n_params:.0f} M parameters, 32-frame videos "
        f"(129 visual tokens); {args.videos} videos x {args.captions} captions; scores equal on {len(pairs)} checked pairs.",
        "", "| method | pairs/s | ratio |", "|---|---|---|",
        f"| naive (2 full forwards per pair) | {naive_rate:.1f} | 1.00x |",
        f"| pnd.CaptionScorer | {scorer_rate:.1f} | {scorer_rate / naive_rate:.1f}x |",
    ])
    print(table)
    if args.out:
        write_section(Path(args.out), "Retrieval scoring", table)
    if args.memory_batches:
        memory = memory_table([int(b) for b in args.memory_batches.split(",")], args.device)
        print(memory)
        if args.out:
            write_section(Path(args.out), "Retrieval scoring memory", memory)


if __name__ == "__main__":
    main()
