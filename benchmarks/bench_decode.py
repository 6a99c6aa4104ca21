"""Decoding cost of prior normalization, as ratios to plain `generate` measured in one run.

    .venv/bin/python benchmarks/bench_decode.py --out benchmarks/RESULTS.md          # CPU, ~8 min on 2 cores
    python benchmarks/bench_decode.py --size 7b --device cuda --dtype bfloat16 [--arch qwen2_vl]   # GPU
    python benchmarks/bench_decode.py --arch qwen3_vl|qwen3_5|qwen4_exp|nemotron_h_omni --size 7b --device cuda \
        --dtype bfloat16
    .venv/bin/python benchmarks/bench_decode.py --method vcd|icd|m3id --static skip --modes-frames 0   # a method's cost

Models have random weights and are built offline from a real architecture's config: `--size cpu` is
LLaVA-OneVision (SigLIP + a 154 M-parameter Qwen2 decoder), `7b` the LLaVA-OneVision-7B / Qwen2-VL-7B
shapes, `tiny` a seconds-long smoke run for the tests. One video prompt (text, `--frames` frames, text).
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
`--method vcd|icd|m3id` (docs/methods.md; default cpn, the rows above): part 1 is plain, plain on 2 rows, pnd's method
(`pnd.decoding.methods`, the paper's defaults) and mitigv's same method where it runs (LLaVA models, via
`build_mitigator`; VCD with seed 0, the noise pnd's seed 0 draws; ICD at lam 0.5, the prior form that ranks as the
paper's alpha 1; M3ID at its defaults), with a line saying whether their greedy tokens are the same. ICD's contrast
prompt is the prompt with 20 random "instruction" tokens after the video; M3ID's unconditioned prompt is the text
without the video. Parts 2 and 3 measure cpn: skipped with another method.
Part 2: plain, plain on 2 rows per prompt, and pnd for greedy, beam search (4 beams) and sampling, at batch 1
and 8 (`--modes-frames`).
Part 3 (`--static with|only|skip`): greedy, batch 1, part 1's prompt, with `cache_implementation="static"`, eager and
compiled (generate's `compile_config`: inductor, its defaults): plain, plain on 2 rows, pnd; pnd's compiled tokens are
checked equal to the naive recompute's first.

Per token: the median time between decoding steps (a last logits processor records when each step's
scores are ready; for mitigv, its per-step sampler); prefill: the time to the first step's scores, best
of `--repeats` and 3 more 1-token runs. Methods are timed round-robin. Peak memory: CUDA's max_memory_allocated, on CPU the peak resident
set (VmHWM) of one more run.
Before anything is timed, pnd's greedy tokens are checked equal to the naive recompute's.
"""

from __future__ import annotations

import argparse
import gc
import math
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from results import write_section
from transformers import AutoConfig, AutoModelForImageTextToText, CompileConfig, LogitsProcessor
from transformers.generation.logits_process import UnbatchedClassifierFreeGuidanceLogitsProcessor

import pnd
from pnd.architectures.layers import layer_plan
from pnd.attachment import attachment_of
from pnd.decoding.methods import method
from pnd.decoding.prior import default_position_ids

ALPHA = 0.5
METHOD_NAMES = ("vcd", "icd", "m3id")  # `--method`: pnd's other methods (docs/methods.md)
# Decoder and vision-tower shapes. "7b" follows LLaVA-OneVision-7B (Qwen2-7B + SigLIP-so400m, 384 px) and
# Qwen2-VL-7B (its 32-block, 1280-wide vision tower; 448 px frames).
SIZES = {
    "tiny": dict(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vocab=1000,
                 siglip=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                             image_size=32, patch_size=8),
                 qwen_vision=dict(depth=1, embed_dim=32, num_heads=2), qwen_pixels=56),
    "cpu": dict(hidden=768, intermediate=3072, layers=12, heads=12, kv_heads=4, vocab=32000,
                siglip=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                            image_size=64, patch_size=8),
                qwen_vision=dict(depth=2, embed_dim=128, num_heads=2), qwen_pixels=112),
    "7b": dict(hidden=3584, intermediate=18944, layers=28, heads=28, kv_heads=4, vocab=152064,
               siglip=dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
                           image_size=384, patch_size=14),
               qwen_vision=dict(depth=32, embed_dim=1280, num_heads=16), qwen_pixels=448),
}
# Qwen3-VL and Qwen3.5 decoders by size. "7b" is Qwen3-VL-8B-Instruct's text model and Qwen3.5-9B's (hybrid: the
# config's default layer types, a full-attention layer after every three Gated DeltaNet layers; rotary embedding on
# a quarter of each 256-wide head). "cpu" and "tiny" keep those layouts, scaled down (tiny: special tokens above the
# prompts' random text ids, 10-999, since a delimiter among them would unbalance the template's pairs).
QWEN3_TEXT = {
    "qwen3_vl": {
        "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, vocab_size=1004, mrope_section=[2, 3, 3]),
        "cpu": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                    num_key_value_heads=4, head_dim=64, vocab_size=32000, mrope_section=[8, 12, 12]),
        "7b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                   num_key_value_heads=8, head_dim=128, vocab_size=151936, mrope_section=[24, 20, 20],
                   rope_theta=5e6),
    },
    "qwen3_5": {
        "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, vocab_size=1004, mrope_section=[2, 3, 3],
                     partial_rotary_factor=1.0, linear_key_head_dim=16, linear_value_head_dim=16,
                     linear_num_key_heads=2, linear_num_value_heads=4),
        "cpu": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=8,
                    num_key_value_heads=2, head_dim=128, vocab_size=32000, mrope_section=[6, 5, 5],
                    partial_rotary_factor=0.25, linear_key_head_dim=64, linear_value_head_dim=64,
                    linear_num_key_heads=6, linear_num_value_heads=12),
        "7b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=32, num_attention_heads=16,
                   num_key_value_heads=4, head_dim=256, vocab_size=248320, mrope_section=[11, 11, 10],
                   partial_rotary_factor=0.25, rope_theta=1e7, linear_key_head_dim=128, linear_value_head_dim=128,
                   linear_num_key_heads=16, linear_num_value_heads=32),
    },
    # Qwen4 (exp): Gated DeltaNet and indexed attention (three to one in "cpu" and "7b"), MoE, hyper-connections.
    # "7b" is transformers' default Qwen4-exp text model with 32 experts instead of 512 (7.38 B parameters with the
    # vision tower); transformers sets no indexer defaults, so its indexer (16 heads, a 2048-key budget in blocks of 4)
    # is chosen here. "cpu"'s budget (64 keys) is under its ~200-token prompts, so the indexer drops keys.
    "qwen4_exp": {
        "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, vocab_size=1004, mrope_section=[2, 3, 3],
                     partial_rotary_factor=1.0, linear_key_head_dim=16, linear_value_head_dim=16,
                     linear_num_key_heads=2, linear_num_value_heads=4,
                     layer_types=["linear_attention", "indexed_attention"] * 2, num_experts=4, num_experts_per_tok=2,
                     moe_intermediate_size=32, shared_expert_intermediate_size=32, hc_count=2, hc_lowrank=16,
                     indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8,
                     indexer_compress_ratio=4),
        "cpu": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=8,
                    num_key_value_heads=2, head_dim=128, vocab_size=32000, mrope_section=[6, 5, 5],
                    partial_rotary_factor=0.25, linear_key_head_dim=64, linear_value_head_dim=64,
                    linear_num_key_heads=6, linear_num_value_heads=12,
                    layer_types=(["linear_attention"] * 3 + ["indexed_attention"]) * 3, num_experts=16,
                    num_experts_per_tok=4, moe_intermediate_size=256, shared_expert_intermediate_size=256, hc_count=2,
                    hc_lowrank=64, indexer_n_heads=4, indexer_kv_heads=1, indexer_head_dim=64, indexer_budget=64,
                    indexer_compress_ratio=4),
        "7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=40, num_attention_heads=16,
                   num_key_value_heads=2, head_dim=256, vocab_size=248320, mrope_section=[11, 11, 10],
                   partial_rotary_factor=0.25, rope_theta=1e7, linear_key_head_dim=128, linear_value_head_dim=128,
                   linear_num_key_heads=16, linear_num_value_heads=32,
                   layer_types=(["linear_attention"] * 3 + ["indexed_attention"]) * 10, num_experts=32,
                   num_experts_per_tok=10, moe_intermediate_size=512, shared_expert_intermediate_size=512,
                   hc_count=4, hc_lowrank=320, indexer_n_heads=16, indexer_kv_heads=1, indexer_head_dim=128,
                   indexer_budget=2048, indexer_compress_ratio=4),
    },
}
# Their vision tower (Qwen3.5's is Qwen3-VL's without deepstack) and frame side in pixels (16-pixel patches).
QWEN3_VISION = {
    "tiny": (dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, num_position_embeddings=16,
                  deepstack_visual_indexes=[0]), 64),
    "cpu": (dict(depth=2, hidden_size=128, intermediate_size=256, num_heads=2, num_position_embeddings=64,
                 deepstack_visual_indexes=[0, 1]), 128),
    "7b": (dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, num_position_embeddings=2304,
                deepstack_visual_indexes=[8, 16, 24]), 448),
}
_M, _A, _MLP, _MOE = "linear_attention", "full_attention", "mlp", "moe"  # Nemotron-H's blocks: Mamba-2, attention, ...
# Nemotron-H Omni by size: its language model (Mamba-2 layers, a few attention layers, MLP or MoE blocks between), its
# RADIO vision tower and frame side in pixels (16-pixel patches, pixel-shuffled 2x2). "7b" is Nemotron-H-8B's decoder
# (52 layers: 24 Mamba-2, 4 attention, 24 MLP; 4096 wide; transformers' default text dimensions) with transformers'
# default RADIO-H tower, 512-pixel frames.
NEMOTRON = {
    "tiny": (dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  layers_block_type=[_M, _MOE, _A, _M, _MLP], mamba_num_heads=4, mamba_head_dim=32, ssm_state_size=16,
                  n_groups=2, chunk_size=16, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                  moe_shared_expert_intermediate_size=32),
             dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2.0), 32),
    "cpu": (dict(hidden_size=768, intermediate_size=3072, num_attention_heads=12, num_key_value_heads=4, head_dim=64,
                 layers_block_type=[_M, _MLP, _M, _A, _MLP, _M, _MOE, _M, _MLP, _M, _A, _MLP], mamba_num_heads=24,
                 mamba_head_dim=64, ssm_state_size=64, n_groups=4, chunk_size=128, n_routed_experts=8,
                 num_experts_per_tok=2, moe_intermediate_size=768, moe_shared_expert_intermediate_size=768),
            dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2), 128),
    "7b": (dict(hidden_size=4096, intermediate_size=21504, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                layers_block_type=[_M, _MLP, _M, _MLP, _M, _MLP, _M, _A, _MLP] * 4 + [_M, _MLP] * 8,
                mamba_num_heads=128, mamba_head_dim=64, ssm_state_size=128, n_groups=8, chunk_size=128),
           dict(hidden_size=1280, num_hidden_layers=32, num_attention_heads=16), 512),
}
ARCHS = ["llava_onevision", "qwen2_vl", *QWEN3_TEXT, "nemotron_h_omni"]
TIMESTAMP_TOKENS = 4  # "<0.5 seconds>" is a few text tokens in front of each frame


def build_model(arch: str = "llava_onevision", size: str = "cpu", device="cpu", dtype=torch.float32, seed: int = 0):
    """A random-weight model of `arch` at `size`, on `device` in `dtype`."""
    s = SIZES[size]
    text = dict(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["intermediate"],
                num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                max_position_embeddings=32768, eos_token_id=None, pad_token_id=0, bos_token_id=None)
    vocab = s["vocab"]
    if arch == "llava_onevision":
        config = AutoConfig.for_model(
            "llava_onevision", text_config=dict(model_type="qwen2", **text),
            vision_config=dict(model_type="siglip_vision_model", **s["siglip"]),
            image_token_index=vocab - 2, video_token_index=vocab - 1, vision_feature_layer=-1,
            vision_feature_select_strategy="full", image_grid_pinpoints=[[s["siglip"]["image_size"]] * 2],
            tie_word_embeddings=False,
        )
    elif arch in QWEN3_TEXT:
        config = _qwen3_config(arch, size)
    elif arch == "nemotron_h_omni":
        return _nemotron(size, device, dtype, seed)
    else:
        half_head = s["hidden"] // s["heads"] // 2
        sections = [half_head // 4, 3 * half_head // 8, half_head - half_head // 4 - 3 * half_head // 8]
        config = AutoConfig.for_model(
            "qwen2_vl", text_config=dict(**text, rope_parameters={"rope_type": "default", "mrope_section": sections,
                                                                  "rope_theta": 1e6}),
            vision_config=dict(**s["qwen_vision"], hidden_size=s["hidden"], patch_size=14, spatial_merge_size=2,
                               temporal_patch_size=2, in_channels=3),
            image_token_id=vocab - 2, video_token_id=vocab - 1, vision_start_token_id=vocab - 4,
            vision_end_token_id=vocab - 3,
        )
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    return model.eval()


def _qwen3_config(arch: str, size: str):
    """A Qwen3-VL, Qwen3.5 or Qwen4 config of `size` (`QWEN3_TEXT`, `QWEN3_VISION`)."""
    text = dict(QWEN3_TEXT[arch][size])
    rope = {"rope_type": "default", "mrope_section": text.pop("mrope_section"), "mrope_interleaved": True,
            "rope_theta": text.pop("rope_theta", 1e6)}
    if "partial_rotary_factor" in text:
        rope["partial_rotary_factor"] = text.pop("partial_rotary_factor")
    vision = dict(QWEN3_VISION[size][0])
    if arch != "qwen3_vl":  # Qwen3.5's and Qwen4's towers have no deepstack
        del vision["deepstack_visual_indexes"]
    vocab = text["vocab_size"]
    return AutoConfig.for_model(
        arch, text_config=dict(**text, rope_parameters=rope, max_position_embeddings=32768, eos_token_id=None,
                               pad_token_id=0, bos_token_id=None),
        vision_config=dict(**vision, patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                           out_hidden_size=text["hidden_size"]),
        image_token_id=vocab - 2, video_token_id=vocab - 1, vision_start_token_id=vocab - 4,
        vision_end_token_id=vocab - 3, tie_word_embeddings=False,
    )


def _nemotron(size: str, device, dtype, seed: int):
    """A Nemotron-H Omni model of `size` (`NEMOTRON`), attached with its processor (a locally built tokenizer): its
    expansion is what the processor reports."""
    from transformers import (
        NemotronH_Omni_Reasoning_V3,
        NemotronH_Omni_Reasoning_V3_Config,
        NemotronH_Omni_Reasoning_V3ImageProcessor,
        NemotronH_Omni_Reasoning_V3Processor,
        NemotronH_Omni_Reasoning_V3VideoProcessor,
        ParakeetFeatureExtractor,
    )
    from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

    from pnd.testing import tiny_tokenizer

    text, vision, side = NEMOTRON[size]
    tokenizer = tiny_tokenizer(["<image>", "<video>", "<img>", "</img>"], vocab_size=1000)
    config = NemotronH_Omni_Reasoning_V3_Config(
        text_config=dict(**text, vocab_size=131072 if size == "7b" else SIZES[size]["vocab"],
                         max_position_embeddings=32768, tie_word_embeddings=False, eos_token_id=None, pad_token_id=0,
                         bos_token_id=None),
        vision_config=dict(**vision, patch_size=16, image_size=side, max_img_size=max(side, 64), num_registers=1,
                           video_temporal_patch_size=2),
        vision_hidden_size=vision["hidden_size"], projector_hidden_size=text["hidden_size"],
        video_temporal_patch_size=2, image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<video>"), tie_word_embeddings=False)
    torch.manual_seed(seed)
    with torch.device(device):
        model = NemotronH_Omni_Reasoning_V3(config).to(dtype).eval()
    patches = (side // 16) ** 2
    processor = NemotronH_Omni_Reasoning_V3Processor(
        image_processor=NemotronH_Omni_Reasoning_V3ImageProcessor(patch_size=16, min_num_patches=patches,
                                                                  max_num_patches=patches),
        video_processor=NemotronH_Omni_Reasoning_V3VideoProcessor(patch_size=16, video_target_num_patches=patches,
                                                                  norm_mean=OPENAI_CLIP_MEAN, norm_std=OPENAI_CLIP_STD),
        tokenizer=tokenizer, feature_extractor=ParakeetFeatureExtractor())
    return pnd.attach(model, processor)


def _nemotron_video_inputs(model, size: str, frames: int, batch: int, generator) -> tuple[dict, torch.Tensor]:
    """Nemotron-H Omni prompts built by its bound processor, one video per call, left-padded together."""
    from pnd.testing import left_padded

    processor, side = attachment_of(model).processor, NEMOTRON[size][2]
    words = "the a video frame scene person moves light shows then what who where why how is in on of".split()

    def sentence(n):
        return " ".join(words[int(i)] for i in torch.randint(0, len(words), (n,), generator=generator))

    rows, texts = [], []
    for r in range(batch):
        prefix, question = sentence(14), sentence(24 - 3 * (r % 3))
        video = torch.randint(0, 256, (frames, 3, side, side), dtype=torch.uint8, generator=generator)
        rows.append(processor(text=[f"{prefix} <video> {question}"], videos=[video], return_tensors="pt"))
        texts.append(processor(text=[f"{prefix} {question}"], return_tensors="pt"))
    inputs = left_padded(rows, 0)
    inputs["pixel_values_videos"] = inputs["pixel_values_videos"].to(model.dtype)
    return inputs.to(model.device), left_padded(texts, 0)["input_ids"].to(model.device)


def _qwen_video(config, size: str, frames: int, batch: int, generator) -> tuple[list[int], dict]:
    """The token expansion of one Qwen-family video and its pixel inputs for `batch` rows."""
    qwen3 = config.model_type in QWEN3_TEXT
    patch = config.vision_config.patch_size
    side = QWEN3_VISION[size][1] if qwen3 else SIZES[size]["qwen_pixels"]
    grid = [frames // 2, side // patch, side // patch]
    start, end, video = config.vision_start_token_id, config.vision_end_token_id, config.video_token_id
    per_frame = grid[1] * grid[2] // 4
    if qwen3:  # the template's pair around per-frame timestamps, each before its own delimited frame
        def frame():
            return torch.randint(10, 1000, (TIMESTAMP_TOKENS,), generator=generator).tolist() + [
                start] + [video] * per_frame + [end]
        visual = [start] + [token for _ in range(grid[0]) for token in frame()] + [end]
    else:
        visual = [start] + [video] * (grid[0] * per_frame) + [end]
    pixels = {"pixel_values_videos": torch.randn(batch * math.prod(grid), 3 * 2 * patch**2, generator=generator),
              "video_grid_thw": torch.tensor([grid] * batch)}
    return visual, pixels


def video_inputs(model, size: str, frames: int, batch: int = 1, seed: int = 0) -> tuple[dict, torch.Tensor]:
    """Left-padded video prompts (text, video, text of different lengths) and the text-only prompts."""
    config, device = model.config, model.device
    generator = torch.Generator().manual_seed(seed)
    if config.model_type == "nemotron_h_omni":
        return _nemotron_video_inputs(model, size, frames, batch, generator)
    if config.model_type == "llava_onevision":
        side = config.vision_config.image_size
        per_side = math.ceil(side // config.vision_config.patch_size / 2)
        visual = [config.video_token_id] * (frames * per_side**2 + 1)
        pixels = {"pixel_values_videos": torch.randn(batch, frames, 3, side, side, generator=generator)}
    else:
        visual, pixels = _qwen_video(config, size, frames, batch, generator)
    rows, texts = [], []
    for r in range(batch):
        prefix = torch.randint(10, 1000, (14,), generator=generator).tolist()
        question = torch.randint(10, 1000, (24 - 3 * (r % 3),), generator=generator).tolist()
        rows.append(prefix + visual + question)
        texts.append(prefix + question)
    inputs = _left_pad(rows) | pixels
    if config.model_type != "llava_onevision":
        inputs["mm_token_type_ids"] = (inputs["input_ids"] == config.video_token_id).long() * 2
    to = {"device": device}
    inputs = {k: v.to(**to, dtype=model.dtype) if v.is_floating_point() else v.to(**to) for k, v in inputs.items()}
    return inputs, _left_pad(texts)["input_ids"].to(device)


def _left_pad(rows: list[list[int]]) -> dict:
    width = max(map(len, rows))
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return {"input_ids": ids, "attention_mask": mask}


class NaivePrior(LogitsProcessor):
    """The masked prior recomputed from scratch at every step (no cache): the brute-force way. With layers that must
    see the kept tokens only (recurrent, indexed: `pnd/architectures/layers.py`), a call on the kept tokens alone at their
    positions."""

    def __init__(self, model, inputs):
        self.model, self.inputs = model, inputs
        self.visual = pnd.architectures.architecture_for(model).expansion(model, inputs["input_ids"],
                                                                          inputs["attention_mask"])
        self.kept_only = layer_plan(model.config.get_text_config(decoder=True)).kept_only

    @torch.no_grad()
    def __call__(self, input_ids, scores):
        prompt_len = self.visual.shape[1]
        grown = {k: torch.cat([v, v.new_zeros(v.shape[0], input_ids.shape[1] - prompt_len)], 1)
                 for k, v in self.inputs.items() if k in ("attention_mask", "mm_token_type_ids")}
        grown["attention_mask"][:, prompt_len:] = 1
        extra = {k: v for k, v in self.inputs.items() if k not in ("input_ids", "attention_mask", "mm_token_type_ids")}
        positions = default_position_ids(self.model, input_ids, **grown, **extra)
        mask = grown["attention_mask"].clone()
        mask[:, :prompt_len] *= ~self.visual
        if self.kept_only:  # the kept tokens hold no placeholder: no pixels
            input_ids, mask, positions = _kept_tokens(input_ids, mask.bool(), positions)
            extra = {}
        prior = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False,
                           **extra).logits[:, -1]
        return torch.log_softmax(scores.float(), -1) - ALPHA * torch.log_softmax(prior.float(), -1)


def _kept_tokens(input_ids, kept, positions):
    """Each row's `kept` tokens alone, left-padded, with their attention mask and position ids ((rows,) batch, L)."""
    width = int(kept.sum(1).max())
    ids, mask = input_ids.new_zeros(input_ids.shape[0], width), kept.new_zeros(kept.shape[0], width, dtype=torch.long)
    compact = positions.new_zeros(*positions.shape[:-1], width)
    for row, keep in enumerate(kept):
        n = int(keep.sum())
        ids[row, width - n:], mask[row, width - n:] = input_ids[row, keep], 1
        compact[..., row, width - n:] = positions[..., row, keep]
    return ids, mask, compact


MITIGV = {  # mitigv's settings for pnd's method at the paper's defaults (docs/methods.md, "pnd and mitigv")
    "vcd": dict(alpha=1.0, beta=0.1, seed=0),  # seed 0: the noise of pnd's seed 0
    "icd": dict(lam=0.5, alpha=0.1),  # l_std - lam * l_dst ranks as (1 + a) l_std - a l_dst at lam = a / (1 + a)
    "m3id": dict(alpha=0.3, forgetting_rate=0.02),
}


def mitigv_vcd(model, inputs):
    """A callable running mitigv's VCD for n tokens on `inputs`, or None where mitigv cannot run."""
    return mitigv_method(model, inputs, "vcd")


def mitigv_method(model, inputs, name: str, unconditional=None, contrast=None):
    """A callable running mitigv's `name` for n tokens on `inputs` (its text-only prompt `unconditional`, M3ID's; its
    contrast inputs `contrast`, ICD's), or None where mitigv cannot run. The callable returns the generated ids."""
    if model.config.model_type != "llava_onevision":
        return None  # mitigv supports the LLaVA and Qwen2.5-VL families
    try:
        from mitigv import build_mitigator
        from mitigv.backends.llava import LlavaModelAdapter
    except ImportError:
        return None

    class FixedInputs:
        """mitigv's processor protocol, handing it the benchmark's prepared inputs."""

        def prepare_inputs(self, prompt, images):
            if prompt and contrast is not None:  # ICD's disturbed prompt (the prompt "" with its prefix)
                return dict(contrast)
            if images is None and unconditional is not None:  # M3ID's prompt without the image
                return {"input_ids": unconditional, "attention_mask": torch.ones_like(unconditional)}
            return dict(inputs)

        def batch_decode(self, ids, **kwargs):
            return [""] * len(ids)

    mitigator = build_mitigator(name, LlavaModelAdapter(model), FixedInputs(), do_sample=False,
                                **MITIGV.get(name, MITIGV["vcd"]))
    mitigator._decode = lambda ids: ids  # the token ids, not text

    def run(tokens, clock):
        def sample_next(logits, cfg):  # called once per step, after both of the method's forwards
            clock(None, logits)
            return type(mitigator)._sample_next(mitigator, logits, cfg)
        mitigator._sample_next = sample_next
        return mitigator.generate("the video", "", max_new_tokens=tokens)  # images: any value but None (M3ID's)
    return run


@torch.no_grad()
def generate(model, inputs, processors, tokens, clock=None, **kwargs):
    if kwargs.get("do_sample"):
        torch.manual_seed(0)
    return model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens,
                          logits_processor=processors + ([clock] if clock else []), **kwargs)


class StepClock(LogitsProcessor):
    """Last in the logits processors: records when each decoding step's scores are ready."""

    def __init__(self, device):
        self.device, self.times = device, []

    def __call__(self, input_ids, scores):
        sync(self.device)
        self.times.append(time.perf_counter())
        return scores


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_memory(run, device) -> float:
    """Peak memory in MB during `run()`: CUDA's allocations, or the process's resident set on CPU."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        run()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak resident set
    run()
    return int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) / 1024


@dataclass(frozen=True)
class Measured:
    """One method's timings: seconds to the first step's scores, median seconds per step, peak memory (MB)."""

    prefill: float
    token: float
    peak: float


@dataclass(frozen=True)
class Failed:
    """A method that raised on this model (a peer that breaks is a result too)."""

    error: str


def measure_all(runs: dict, device, repeats: int, prefill_repeats: int = 3) -> dict:
    """Time every method of `runs` ({name: (run, tokens)}) round-robin, so that drifts of the machine hit all alike.

    Per token: the median time between steps over `repeats` runs; prefill: the time to the first step's
    scores, best of those and `prefill_repeats` more 1-token runs; peak memory of one more run. Returns
    {name: Measured or Failed}.
    """
    prefill = {name: math.inf for name in runs}
    steps: dict[str, list[float]] = {name: [] for name in runs}
    failed: dict[str, Failed] = {}

    def attempt(name: str, tokens: int, record: bool = True) -> None:
        clock = StepClock(device)
        sync(device)
        start = time.perf_counter()
        try:
            runs[name][0](tokens, clock)
        except Exception as error:
            failed[name] = Failed(f"{type(error).__name__}: {str(error).splitlines()[0][:80]}")
            return
        if record:
            prefill[name] = min(prefill[name], clock.times[0] - start)
            steps[name] += [later - earlier for earlier, later in zip(clock.times, clock.times[1:])]

    for name in runs:
        attempt(name, 2, record=False)  # warm-up
    for i in range(repeats + prefill_repeats):
        for name, (_, tokens) in runs.items():
            if name not in failed:
                attempt(name, tokens if i < repeats else 1)
    return {name: failed.get(name) or Measured(prefill[name], statistics.median(steps[name]),
                                               peak_memory(lambda: run(tokens, StepClock(device)), device))
            for name, (run, tokens) in runs.items()}


def check_tokens(model, inputs, tokens: int, **kwargs) -> None:
    ours = generate(model, inputs, [pnd.PriorNormalized(ALPHA)], tokens, do_sample=False, **kwargs)
    naive = generate(model, inputs, [NaivePrior(model, inputs)], tokens, do_sample=False)
    if not torch.equal(ours, naive):
        raise AssertionError(f"pnd's greedy tokens ({kwargs or 'default cache'}) differ from the naive recompute path")


def icd_contrast(inputs, tokens: int = 20, seed: int = 1) -> dict:
    """ICD's contrast inputs for a 1-row video prompt: `tokens` random "instruction" tokens inserted after the video
    (before the question: the prompt's last 24 tokens), the pixels the same."""
    ids = inputs["input_ids"]
    instruction = torch.randint(10, 1000, (1, tokens), generator=torch.Generator().manual_seed(seed)).to(ids)
    at = ids.shape[1] - 24
    fill = {"input_ids": instruction, "attention_mask": torch.ones_like(instruction)}
    return {k: torch.cat([v[:, :at], fill.get(k, torch.zeros_like(instruction)).to(v), v[:, at:]], 1)
            if v.shape == ids.shape else v for k, v in inputs.items()}


def method_peers(model, inputs, unconditional, args, device) -> tuple[list[tuple[str, dict]], str]:
    """Part 1 for `args.method` (vcd, icd, m3id): plain, plain on 2 rows, pnd's method and mitigv's; and a line saying
    whether pnd's and mitigv's greedy tokens are the same."""
    doubled = {k: torch.cat([v, v]) for k, v in inputs.items()}
    extra = {"prior_inputs": icd_contrast(inputs)} if args.method == "icd" else {}
    label = args.method.upper()
    runs = {
        "plain": lambda n, clock: generate(model, inputs, [], n, clock, do_sample=False),
        "plain, 2 rows": lambda n, clock: generate(model, doubled, [], n, clock, do_sample=False),
        f"pnd {label}": lambda n, clock: generate(model, inputs, [method(args.method).processor()], n, clock,
                                                  do_sample=False, **extra),
        f"mitigv {label}": mitigv_method(model, inputs, args.method, unconditional if args.method == "m3id" else None,
                                         extra.get("prior_inputs")),
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
    return list(results.items()), same


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


def modes(model, args, device) -> list[tuple[str, int, dict, dict]]:
    rows = []
    for batch in (1, 8):
        inputs, _ = video_inputs(model, args.size, args.modes_frames, batch)
        if batch > 1:
            check_tokens(model, inputs, 4)
        doubled = {k: torch.cat([v, v]) for k, v in inputs.items()}
        for mode, kwargs in MODES.items():
            runs = {"plain": lambda n, clock: generate(model, inputs, [], n, clock, **kwargs),
                    "plain, 2 rows": lambda n, clock: generate(model, doubled, [], n, clock, **kwargs),
                    "pnd": lambda n, clock: generate(model, inputs, [pnd.PriorNormalized(ALPHA)], n, clock, **kwargs)}
            measured = measure_all({name: (run, args.modes_tokens) for name, run in runs.items()}, device, args.repeats)
            rows.append((mode, batch, measured))
            print(mode, batch, measured, flush=True)
    return rows


def static_cache(model, inputs, args, device) -> list[tuple[str, Measured | Failed]]:
    """Part 3: plain and pnd with a static cache, eager and compiled (one cache length for every run: one compile)."""
    compiled = CompileConfig(backend=args.compile_backend)
    compiled._compile_all_devices = device.type != "cuda"  # generate compiles on CUDA-like devices only unless told
    static = dict(cache_implementation="static", max_cache_len=inputs["input_ids"].shape[1] + max(args.tokens, 8))
    settings = {"static": static, "static, compiled": static | {"compile_config": compiled}}
    check_tokens(model, inputs, 8, **settings["static, compiled"])
    doubled = {k: torch.cat([v, v]) for k, v in inputs.items()}
    methods = {"plain": (inputs, list), "plain, 2 rows": (doubled, list),
               "pnd": (inputs, lambda: [pnd.PriorNormalized(ALPHA)])}
    runs = {f"{name}, {setting}": (lambda n, clock, i=rows, p=processors, k=kwargs: generate(
                model, i, p(), n, clock, do_sample=False, **k), args.tokens)
            for setting, kwargs in settings.items() for name, (rows, processors) in methods.items()}
    results = measure_all(runs, device, args.repeats)
    for name, result in results.items():
        print(name, result, flush=True)
    return list(results.items())


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


def setup_line(model, args, device) -> str:
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    return (f"{hardware(device)}, torch {torch.__version__}, {args.dtype}; random {model.config.model_type} "
            f"({args.size} shape, {n_params:,.1f} M parameters). {args.repeats} runs per method (per token: median time "
            "between steps; prefill: time to the first step's scores, best of 3 more runs too). Greedy tokens of pnd == "
            "the naive recompute's: checked in the run.")


def report(model, inputs, args, device, peer_rows, mode_rows, note: str = "") -> str:
    lines = [setup_line(model, args, device) + (f" {note}" if note else ""), "",
             f"Greedy, batch 1, {inputs['input_ids'].shape[1]}-token prompt with a {args.frames}-frame video, "
             f"{args.tokens} new tokens" + (f" (naive: {min(args.tokens, args.naive_tokens)}):" if any(
                 name == "naive" for name, _ in peer_rows) else ":"), ""]
    lines += method_table(peer_rows, {name: peer_rows[0][1] for name, _ in peer_rows})
    if mode_rows:
        lines += ["", f"pnd against plain `generate` by decoding mode ({args.modes_frames}-frame video, "
                  f"{args.modes_tokens} new tokens; batch 8 = 8 prompts of different lengths, left-padded):", "",
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


def static_report(model, inputs, args, device, static_rows) -> str:
    measured = dict(static_rows)
    lines = [setup_line(model, args, device), "",
             f"Greedy, batch 1, {inputs['input_ids'].shape[1]}-token prompt with a {args.frames}-frame video, "
             f"{args.tokens} new tokens, `cache_implementation=\"static\"`, eager or compiled (generate's "
             f"`compile_config`: {args.compile_backend}, its defaults); each row's ratios are to plain with the same cache and "
             "compilation:", ""]
    plain = {name: measured[re.sub(r"^(pnd|plain, 2 rows)", "plain", name)] for name in measured}
    lines += method_table(static_rows, plain)
    return "\n".join(lines)


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
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--static", choices=["with", "only", "skip"], default="with",
                        help="part 3, static cache and compiled decoding: with parts 1-2, only it, or skip it")
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend of part 3")
    parser.add_argument("--method", choices=["cpn", *METHOD_NAMES], default="cpn",
                        help="the decoding method of part 1 (parts 2-3: cpn only, skipped with another method)")
    parser.add_argument("--out", help="write the table to this Markdown file (its decoding section)")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    model = pnd.attach(build_model(args.arch, args.size, device, getattr(torch, args.dtype)))
    inputs, unconditional = video_inputs(model, args.size, args.frames)
    check_tokens(model, inputs, 8)
    tables = {}
    if args.method != "cpn":
        rows, same = method_peers(model, inputs, unconditional, args, device)
        tables[f"Decoding, {args.method}: {args.arch}, {args.size}, {hardware(device)}"] = report(
            model, inputs, args, device, rows, [], same)
        if args.modes_frames or args.static != "skip":
            print("Parts 2-3 skipped: they measure cpn.")
    elif args.static != "only":
        tables[f"Decoding: {args.arch}, {args.size}, {hardware(device)}"] = report(
            model, inputs, args, device, peers(model, inputs, unconditional, args, device),
            modes(model, args, device) if args.modes_frames else [])
    if args.method != "cpn":
        pass
    elif args.static != "skip" and not layer_plan(model.config.get_text_config(decoder=True)).static:
        print(f"Part 3 skipped: pnd's static cache holds attention layers only, {args.arch} has recurrent or indexed "
              "ones.")
    elif args.static != "skip":
        tables[f"Decoding, static cache and torch.compile: {args.arch}, {args.size}, {hardware(device)}"] = (
            static_report(model, inputs, args, device, static_cache(model, inputs, args, device)))
    for title, table in tables.items():
        print(table)
        if args.out:
            write_section(Path(args.out), title, table)
    return "\n\n".join(tables.values())


if __name__ == "__main__":
    main()
