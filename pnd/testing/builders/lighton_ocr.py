"""LightOnOCR: a tiny random-weight `LightOnOcrForConditionalGeneration` and its processor, built offline (images only).

A Pixtral vision tower (2D RoPE) reads 8-pixel patches, merged 2x2 and projected to the Qwen3 language model. A
64-pixel image is 4x4 merged tokens: the processor writes 16 `<|image_pad|>` placeholders and nothing else (its image
break and end tokens are declared but not written in transformers 5.23).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        LightOnOcrConfig,
        LightOnOcrForConditionalGeneration,
        LightOnOcrProcessor,
        PixtralImageProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    named = {"image_token": "<|image_pad|>", "image_break_token": "<|vision_pad|>", "image_end_token": "<|vision_end|>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    config = LightOnOcrConfig(
        vision_config=dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, head_dim=16, image_size=64, patch_size=8),
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen3", "head_dim": 16},
        spatial_merge_size=2,
        image_token_id=tokenizer.image_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LightOnOcrForConditionalGeneration(config).eval()
    processor = LightOnOcrProcessor(
        image_processor=PixtralImageProcessor(size={"longest_edge": 64}, patch_size=16),
        tokenizer=tokenizer,
        patch_size=8,
        spatial_merge_size=2,
        chat_template=chat_template("<|image_pad|>"),
    )
    return model, processor
