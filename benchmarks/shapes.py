"""The benchmarks' models (`build_model`): random weights, built offline from a real architecture's config at a size,
"tiny" (seconds, for the tests), "small" (LLaVA-OneVision and Qwen2-VL only: a 384-wide, 6-layer decoder), "cpu" or
"7b" (the shapes of the 7B-class models named below)."""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForImageTextToText

import pnd

# Decoder and vision-tower shapes. "7b" follows LLaVA-OneVision-7B (Qwen2-7B + SigLIP-so400m, 384 px) and
# Qwen2-VL-7B (its 32-block, 1280-wide vision tower; 448 px frames).
SIZES = {
    "tiny": dict(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vocab=1000,
                 siglip=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                             image_size=32, patch_size=8),
                 qwen_vision=dict(depth=1, embed_dim=32, num_heads=2), qwen_pixels=56),
    # "small": the decoder of hidden 384 / 6 layers where a fixed per-step cost still shows (issue 47), a tiny tower
    "small": dict(hidden=384, intermediate=1536, layers=6, heads=6, kv_heads=2, vocab=32000,
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


def build_model(arch: str = "llava_onevision", size: str = "cpu", device="cpu", dtype=torch.float32, seed: int = 0):
    """A random-weight model of `arch` at `size`, on `device` in `dtype`."""
    shapes = NEMOTRON if arch == "nemotron_h_omni" else QWEN3_TEXT.get(arch, SIZES)
    if size not in shapes:
        raise ValueError(f"--size {size} has no {arch} shape: take one of {', '.join(shapes)}.")
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
