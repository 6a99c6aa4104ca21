"""VideoLLaMA3: a tiny model and its processor."""

from __future__ import annotations

import torch

from ..parts import chat_template, tiny_llama_text, tiny_tokenizer


def build(seed: int):
    from transformers import (
        VideoLlama3Config,
        VideoLlama3ForConditionalGeneration,
        VideoLlama3ImageProcessor,
        VideoLlama3Processor,
        VideoLlama3VideoProcessor,
    )

    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    config = VideoLlama3Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           patch_size=14),
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen2"},
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
    )
    torch.manual_seed(seed)
    model = VideoLlama3ForConditionalGeneration(config).eval()
    pixels = dict(min_pixels=56 * 56, max_pixels=56 * 56)
    processor = VideoLlama3Processor(
        image_processor=VideoLlama3ImageProcessor(**pixels),
        video_processor=VideoLlama3VideoProcessor(min_pixels=112 * 112, max_pixels=112 * 112),
        tokenizer=tokenizer,
        chat_template=chat_template("<|image_pad|>", "<|video_pad|>"),
    )
    return model, processor
