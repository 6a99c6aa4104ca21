"""SmolVLM: a tiny model with SmolVLM's own chat template (which its processor forces for videos)."""

from __future__ import annotations

import torch

from ..parts import tiny_llama_text, tiny_tokenizer


def build(seed: int):
    from transformers import (
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )
    from transformers.models.smolvlm.processing_smolvlm import DEFAULT_CHAT_TEMPLATE

    named = {"fake_image_token": "<fake_token_around_image>", "image_token": "<image>",
             "global_image_token": "<global-img>", "end_of_utterance_token": "<end_of_utterance>", "video_token": "<video>"}
    tiles = [f"<row_{row}_col_{col}>" for row in (1, 2) for col in (1, 2)]
    # the intro trained in, so that " You" after the template's "User:" is one token (half template, half expansion)
    tokenizer = tiny_tokenizer([*named.values(), *tiles], named=named,
                               corpus=("User: You are provided the following series of frames from a video",))
    config = SmolVLMConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        text_config=tiny_llama_text(tokenizer),
        image_token_id=tokenizer.image_token_id,
        scale_factor=2,  # (32 / 8)^2 / 2^2 = 4 tokens per frame or tile
    )
    torch.manual_seed(seed)
    model = SmolVLMForConditionalGeneration(config).eval()
    tile = {"longest_edge": 32}
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(size={"longest_edge": 64}, max_image_size=tile),
        video_processor=SmolVLMVideoProcessor(size=tile, max_image_size=tile),
        tokenizer=tokenizer,
        image_seq_len=4,
        chat_template=DEFAULT_CHAT_TEMPLATE,  # SmolVLM's own, which its processor also forces for videos
    )
    return model, processor
