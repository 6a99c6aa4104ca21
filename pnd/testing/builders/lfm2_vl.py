"""LFM2-VL: a tiny model with LFM2's short-convolution layers and its processor; images only."""

from __future__ import annotations

import torch

from ..parts import chat_template, tiny_llama_text, tiny_tokenizer


def build(seed: int):
    """LFM2-VL: a hybrid language model (short-convolution layers on both sides of a full-attention layer); a 56x56
    image is split into 2x2 tiles of 4 tokens each plus a thumbnail of 4, a 32x128 one into 1x4 tiles plus a thumbnail
    of 4, a 32x32 one is a single block of 4."""
    from transformers import Lfm2VlConfig, Lfm2VlForConditionalGeneration, Lfm2VlImageProcessor, Lfm2VlProcessor

    named = {"image_token": "<image>", "image_start_token": "<|image_start|>", "image_end_token": "<|image_end|>",
             "image_thumbnail_token": "<|img_thumbnail|>"}
    tiles = [f"<|img_row_{row}_col_{col}|>" for row in (1, 2) for col in (1, 2, 3, 4)]
    tokenizer = tiny_tokenizer([*named.values(), *tiles], named=named)
    config = Lfm2VlConfig(
        vision_config=dict(model_type="siglip2_vision_model", hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=2, patch_size=8, num_patches=16),
        text_config={**tiny_llama_text(tokenizer), "model_type": "lfm2", "num_hidden_layers": 3,
                     "layer_types": ["conv", "full_attention", "conv"], "block_auto_adjust_ff_dim": False},
        image_token_id=tokenizer.image_token_id,
        projector_hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Lfm2VlForConditionalGeneration(config).eval()
    processor = Lfm2VlProcessor(
        image_processor=Lfm2VlImageProcessor(encoder_patch_size=8, tile_size=32, min_image_tokens=1,
                                             max_image_tokens=4, min_tiles=2, max_tiles=4),
        tokenizer=tokenizer,
        chat_template=chat_template("<image>"),
    )
    return model, processor
