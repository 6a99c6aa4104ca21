"""Aya Vision: a tiny random-weight `AyaVisionForConditionalGeneration` and its processor, built offline (images only:
the family has no video processor).

GOT-OCR2's image processor crops a 64-pixel image to a 2x2 grid of 32-pixel tiles plus a thumbnail; a SigLIP tower
reads each tile's 4x4 patches of 8 pixels, pixel-shuffled 2x2 and projected (layer norm, SwiGLU) to 4 tokens. The
processor writes `<|START_OF_IMG|>`, per grid tile the label `TILE_<i>` (text) and its 4 `<|IMG_PATCH|>` tokens, then
`TILE_GLOBAL` and the thumbnail's 4, then `<|END_OF_IMG|>`. The Cohere 2 language model keeps its layer mix: a
sliding-window layer and a full-attention layer.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        AyaVisionConfig,
        AyaVisionForConditionalGeneration,
        AyaVisionProcessor,
        GotOcr2ImageProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>"],
                               corpus=("TILE_1 TILE_2 TILE_3 TILE_4 TILE_GLOBAL",))
    config = AyaVisionConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8, vision_use_head=False),
        text_config={**tiny_llama_text(tokenizer), "model_type": "cohere2", "sliding_window": 16, "logit_scale": 1.0,
                     "layer_types": ["sliding_attention", "full_attention"]},
        downsample_factor=2,
        image_token_index=tokenizer.convert_tokens_to_ids("<|IMG_PATCH|>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AyaVisionForConditionalGeneration(config).eval()
    processor = AyaVisionProcessor(
        image_processor=GotOcr2ImageProcessor(size={"height": 32, "width": 32}, max_patches=4),
        tokenizer=tokenizer,
        patch_size=8,
        img_size=32,
        downsample_factor=2,
        chat_template=chat_template("<image>"),
    )
    return model, processor
