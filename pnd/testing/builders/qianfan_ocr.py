"""Qianfan-OCR: a tiny random-weight `QianfanOCRForConditionalGeneration` and its processor, built offline (images
only).

InternVL's format: an InternViT-style tower reads 32-pixel tiles as 4x4 patches of 8 pixels, pixel-shuffled
(`downsample_ratio` 0.5) to 4 tokens per tile, on a Qwen3 language model. With tiling on (the processor's default,
at most 4 tiles here) a 64-pixel image is a 2x2 grid plus a thumbnail: the template's `<image>` becomes `<img>`, the
5 tiles' 20 `<IMG_CONTEXT>` tokens and `</img>`.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        GotOcr2ImageProcessor,
        QianfanOCRConfig,
        QianfanOCRForConditionalGeneration,
        QianfanOCRProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    named = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>"}
    tokenizer = tiny_tokenizer(["<image>", *named.values()], named=named)
    config = QianfanOCRConfig(
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8),
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen3", "head_dim": 16},
        image_token_id=tokenizer.context_image_token_id,
        image_seq_length=4,  # (32 / 8)^2 patches, pixel-shuffled by downsample_ratio 0.5
        downsample_ratio=0.5,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = QianfanOCRForConditionalGeneration(config).eval()
    processor = QianfanOCRProcessor(
        image_processor=GotOcr2ImageProcessor(size={"height": 32, "width": 32}, max_patches=4),
        tokenizer=tokenizer,
        image_seq_length=4,
        chat_template=chat_template("<image>"),
    )
    return model, processor
