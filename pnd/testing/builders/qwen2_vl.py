"""Qwen2-VL and Qwen2.5-VL (`model_type`): a tiny model with M-RoPE and its processor."""

from __future__ import annotations

import torch

from ..parts import QWEN_VISION_TOKENS, chat_template, tiny_tokenizer, vision_token_ids


def build(seed: int, model_type: str = "qwen2_vl"):
    from transformers import (
        AutoConfig,
        AutoModelForImageTextToText,
        Qwen2VLProcessor,
    )

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS))
    vision = dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, patch_size=14, spatial_merge_size=2,
                  temporal_patch_size=2, in_channels=3)
    if model_type == "qwen2_5_vl":
        vision = dict(depth=2, hidden_size=32, out_hidden_size=64, intermediate_size=64, num_heads=2, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1])
    config = AutoConfig.for_model(
        model_type,
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=vision,
        **vision_token_ids(tokenizer),
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    return model, Qwen2VLProcessor(tokenizer=tokenizer, **qwen2_vl_processor_parts())


def qwen2_vl_processor_parts(video: str = "<|vision_start|><|video_pad|><|vision_end|>") -> dict:
    """Qwen2-VL's image and video processors (one 56-pixel grid: 4 tokens per image or frame pair) and the chat
    template writing `video` for a video: the processor parts of the families of its format (EXAONE 4.5,
    HyperCLOVA X Vision V2)."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    pixels = dict(min_pixels=56 * 56, max_pixels=56 * 56)
    return dict(image_processor=Qwen2VLImageProcessor(**pixels),
                video_processor=Qwen2VLVideoProcessor(**pixels, cap_pixels_per_frame=True),
                chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>", video))
