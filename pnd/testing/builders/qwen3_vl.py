"""Qwen3-VL, Qwen3-VL-MoE, Qwen3.5 and Qwen3.5-MoE (`model_type`; Qwen3.5 with its hybrid Gated DeltaNet layers), and
the Qwen3-VL processor parts the families of its format share."""

from __future__ import annotations

import torch

from ..parts import HYBRID_LAYERS, QWEN_VISION_TOKENS, chat_template, tiny_tokenizer, vision_token_ids


def build(seed: int, model_type: str = "qwen3_vl"):
    """Qwen3-VL, or Qwen3.5 (same processor; a hybrid language model: Gated-DeltaNet layers around full attention)."""
    from transformers import AutoConfig, AutoModelForImageTextToText, Qwen3VLProcessor

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS))
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True, "rope_theta": 10000.0}
    text = dict(num_hidden_layers=2, intermediate_size=128)
    vision = dict(deepstack_visual_indexes=[0])
    if model_type.startswith("qwen3_5"):  # rotary on the whole head (Qwen3.5 defaults to a quarter of it)
        rope["partial_rotary_factor"] = 1.0
        text = dict(num_hidden_layers=3, intermediate_size=128, layer_types=HYBRID_LAYERS, linear_conv_kernel_dim=4,
                    linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4)
        vision = {}
    if model_type.endswith("moe"):
        text |= dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
        if model_type == "qwen3_5_moe":
            text |= dict(shared_expert_intermediate_size=32)
    config = AutoConfig.for_model(
        model_type,
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=1024, rope_parameters=rope, **text,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                           num_position_embeddings=16, **vision),
        **vision_token_ids(tokenizer),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    return model, Qwen3VLProcessor(tokenizer=tokenizer, **qwen3_vl_processor_parts())


def qwen3_vl_processor_parts() -> dict:
    """The tiny Qwen3-VL processor's image and video processors and chat template (families that write its format
    build theirs from them): a 64-pixel image or frame pair is 4 tokens."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLVideoProcessor

    video_size = {"shortest_edge": 64 * 64, "longest_edge": 64 * 64 * 4}
    return dict(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=64 * 64),
        video_processor=Qwen3VLVideoProcessor(size=video_size, patch_size=16, merge_size=2, do_sample_frames=False,
                                              cap_pixels_per_frame=True, fps=2),
        chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>",
                                    "<|vision_start|><|video_pad|><|vision_end|>"),
    )
