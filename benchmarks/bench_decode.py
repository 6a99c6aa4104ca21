"""Decoding cost of prior normalization, as ratios to plain `generate` measured in one run.

    .venv/bin/python benchmarks/bench_decode.py [--tokens 32] [--repeats 3] [--out benchmarks/RESULTS.md]

Model: a random-weight LLaVA-OneVision (SigLIP + Qwen2 decoder, >= 100 M parameters, built offline from
a config) on one 16-frame video prompt, greedy decoding. Compared, on the same model and inputs:
  plain   - model.generate
  pnd     - model.generate with pnd.PriorNormalized (paired forward, text-only prior prefill)
  cfg     - transformers' UnbatchedClassifierFreeGuidanceLogitsProcessor with the text-only prompt
            (a second model call per step with its own cache, the peers' approach)
  naive   - the prior recomputed without cache: a full masked forward over the whole sequence per step
Per-token time = (time for N tokens - time for 1 token) / (N - 1); prefill = time for 1 token.
The greedy tokens of pnd are checked against the naive path before anything is timed.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration, LogitsProcessor
from transformers.generation.logits_process import UnbatchedClassifierFreeGuidanceLogitsProcessor

import pnd
from pnd.prior import default_position_ids

ALPHA = 0.5


def build_model(vocab=32000, hidden=768, layers=12, frames=16, seed=0):
    video_token = vocab - 1
    config = LlavaOnevisionConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=128, intermediate_size=256,
                           num_hidden_layers=2, num_attention_heads=2, image_size=64, patch_size=8),
        text_config=dict(model_type="qwen2", vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden,
                         num_hidden_layers=layers, num_attention_heads=12, num_key_value_heads=4,
                         max_position_embeddings=4096, eos_token_id=None, pad_token_id=0),
        image_token_index=vocab - 2, video_token_index=video_token, vision_feature_layer=-1,
        vision_feature_select_strategy="full", image_grid_pinpoints=[[64, 64]], tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    n_video = frames * 4 * 4 + 1  # frames * ceil(8/2)^2 + newline
    prompt = torch.randint(10, 1000, (1, 14)).tolist()[0]
    text = torch.randint(10, 1000, (1, 24)).tolist()[0]
    input_ids = torch.tensor([prompt + [video_token] * n_video + text])
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
              "pixel_values_videos": torch.randn(1, frames, 3, 64, 64)}
    unconditional = torch.tensor([prompt + text])
    return model, inputs, unconditional


class NaivePrior(LogitsProcessor):
    """Recompute the masked prior from scratch at every step (no cache): the brute-force way."""

    def __init__(self, model, inputs):
        self.model, self.inputs = model, inputs
        self.visual = inputs["input_ids"] == model.config.video_token_id

    @torch.no_grad()
    def __call__(self, input_ids, scores):
        mask = torch.ones_like(input_ids)
        mask[:, : self.visual.shape[1]] *= ~self.visual
        positions = default_position_ids(self.model, input_ids, torch.ones_like(input_ids))
        prior = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                           pixel_values_videos=self.inputs["pixel_values_videos"], use_cache=False).logits[:, -1]
        return torch.log_softmax(scores, -1) - ALPHA * torch.log_softmax(prior.float(), -1)


def methods(model, inputs, unconditional):
    return {
        "plain": lambda: [],
        "pnd": lambda: [pnd.PriorNormalized(ALPHA)],
        "cfg": lambda: [UnbatchedClassifierFreeGuidanceLogitsProcessor(1 - ALPHA, model, unconditional)],
        "naive": lambda: [NaivePrior(model, inputs)],
    }


@torch.no_grad()
def run(model, inputs, processors, tokens):
    return model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                          logits_processor=processors)


def timed(model, inputs, make, tokens, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(model, inputs, make(), tokens)
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="also write the table to this Markdown file")
    args = parser.parse_args()

    model, inputs, unconditional = build_model()
    pnd.attach(model)
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    check = 8
    ours = run(model, inputs, [pnd.PriorNormalized(ALPHA)], check)
    naive = run(model, inputs, [NaivePrior(model, inputs)], check)
    assert torch.equal(ours, naive), "pnd's greedy tokens differ from the naive recompute path"

    rows, make = [], methods(model, inputs, unconditional)
    for name, processors in make.items():
        run(model, inputs, processors(), 2)  # warm-up
        first = timed(model, inputs, processors, 1, args.repeats)
        full = timed(model, inputs, processors, args.tokens, args.repeats)
        rows.append((name, first, (full - first) / (args.tokens - 1)))
    plain_prefill, plain_token = rows[0][1], rows[0][2]
    lines = [
        f"CPU ({torch.get_num_threads()} threads), torch {torch.__version__}; random LLaVA-OneVision, "
        f"{n_params:.0f} M parameters, {inputs['input_ids'].shape[1]}-token prompt with a 16-frame video, "
        f"greedy, batch 1, {args.tokens} new tokens, best of {args.repeats}. Greedy tokens of pnd == naive: yes (checked in the run).",
        "",
        "| method | prefill (ms) | prefill ratio | per token (ms) | per-token ratio |",
        "|---|---|---|---|---|",
    ]
    for name, prefill, token in rows:
        lines.append(f"| {name} | {prefill * 1e3:.1f} | {prefill / plain_prefill:.2f}x | {token * 1e3:.1f} | "
                     f"{token / plain_token:.2f}x |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Benchmark results\n\nRegenerate with `bash benchmarks/run.sh`.\n\n## Decoding\n\n"
                    + table + "\n")


if __name__ == "__main__":
    main()
