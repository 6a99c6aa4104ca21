"""Aya Vision: a SigLIP vision tower, a pixel-shuffle projector (downsample factor 2) and a Cohere2 language model
(sliding-window and full attention layers).

The processor writes per image `<|START_OF_IMG|>`, per tile `TILE_<i>` + `<|IMG_PATCH|>` tokens, then `TILE_GLOBAL` +
`<|IMG_PATCH|>` tokens for the whole image, then `<|END_OF_IMG|>`: all of it the expansion. A 56-pixel image is cut into
2x2 tiles of 32 pixels plus the global view, each 4x4 patches of 8 pixels shuffled to 2x2 (4 tokens).
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

    from pnd.testing import chat_template, tiny_tokenizer

    specials = ["<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>", "TILE",
                "TILE_GLOBAL"]
    tokenizer = tiny_tokenizer(specials, corpus=("TILE_1 TILE_2 TILE_3 TILE_4",))
    config = AyaVisionConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8),
        text_config=dict(model_type="cohere2", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         layer_types=["sliding_attention", "full_attention"], sliding_window=16,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None),
        image_token_index=tokenizer.convert_tokens_to_ids("<|IMG_PATCH|>"),
        downsample_factor=2,
        vision_feature_layer=-1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AyaVisionForConditionalGeneration(config).eval()
    processor = AyaVisionProcessor(
        image_processor=GotOcr2ImageProcessor(size={"height": 32, "width": 32}, crop_to_patches=True, min_patches=1,
                                              max_patches=4),
        tokenizer=tokenizer,
        patch_size=8,
        img_size=32,
        downsample_factor=2,
        chat_template=chat_template("<image>"),
    )
    return model, processor
