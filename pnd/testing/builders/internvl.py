"""InternVL: a tiny model and its processor (frame labels, `<img>` delimiters)."""

from __future__ import annotations

import torch

from ..parts import chat_template, tiny_llama_text, tiny_tokenizer


def build(seed: int):
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
    )

    named = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
             "video_token": "<video>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    config = InternVLConfig(
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8),
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen2"},
        image_token_id=tokenizer.context_image_token_id,
        image_seq_length=4,  # (32 / 8)^2 patches, pixel-shuffled by downsample_ratio 0.5
        downsample_ratio=0.5,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = InternVLForConditionalGeneration(config).eval()
    size = {"height": 32, "width": 32}
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=size, max_patches=2),
        video_processor=InternVLVideoProcessor(size=size),
        tokenizer=tokenizer,
        image_seq_length=4,
        chat_template=chat_template("<IMG_CONTEXT>\n", "<video>\n"),
    )
    return model, processor
