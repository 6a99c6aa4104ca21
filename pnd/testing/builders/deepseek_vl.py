"""DeepSeek-VL: a tiny random-weight `DeepseekVLForConditionalGeneration` and its processor, built offline (images
only).

A SigLIP tower reads a 32-pixel image (padded to a square) as 4x4 patches of 8 pixels; a two-layer aligner projects
them to the Llama language model. The processor writes `num_image_tokens` `<image_placeholder>` tokens (16 here, the
real 576) and nothing else.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        DeepseekVLConfig,
        DeepseekVLForConditionalGeneration,
        DeepseekVLImageProcessor,
        DeepseekVLProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image_placeholder>"], named={"image_token": "<image_placeholder>"})
    config = DeepseekVLConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8),
        text_config=tiny_llama_text(tokenizer),
        image_token_id=tokenizer.image_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = DeepseekVLForConditionalGeneration(config).eval()
    processor = DeepseekVLProcessor(
        image_processor=DeepseekVLImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        num_image_tokens=16,
        chat_template=chat_template("<image_placeholder>"),
    )
    return model, processor
