"""Granite Docling: a tiny random-weight `GraniteDoclingForConditionalGeneration` and its processor, built offline
(images only).

A SigLIP-style tower reads 32-pixel tiles as 8x8 patches of 4 pixels; the connector pixel-shuffles them 4x4 to 4 tokens
per tile (the coarse path; the fine path, 2x2 and 16 tokens, is built but taken only with `fine_route=True`), and each
vision layer named in `deepstack_visual_indexes` is merged the same way and added to the image tokens' hidden states
before the matching language-model layer (DeepStack). A 64-pixel image is a 2x2 grid of tiles plus a thumbnail; the
processor writes Idefics3's layout: per tile `<fake_token_around_image><row_i_col_j>` and 4 `<image>`, a newline
after each tile row, then `\\n<fake_token_around_image><global-img>`, the thumbnail's 4 and `<fake_token_around_image>`.
Of Granite's multipliers, attention (1/head_dim) and logits (divided by 2) are set as in the real checkpoint; the
embedding and residual multipliers stay 1 (as in the Granite 4 Vision builder).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        GraniteDoclingConfig,
        GraniteDoclingForConditionalGeneration,
        GraniteDoclingImageProcessor,
        GraniteDoclingProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    specials = ["<fake_token_around_image>", "<image>", "<global-img>"]
    tiles = [f"<row_{row}_col_{col}>" for row in (1, 2) for col in (1, 2)]
    tokenizer = tiny_tokenizer([*specials, *tiles], named={"image_token": "<image>"})
    config = GraniteDoclingConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=4, out_hidden_size=64, scale_factor=4,
                           deepstack_visual_indexes=[0, 1]),
        text_config=dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         embedding_multiplier=1.0, residual_multiplier=1.0, attention_multiplier=1 / 16,
                         logits_scaling=2.0, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None, tie_word_embeddings=False),
        image_token_id=tokenizer.image_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = GraniteDoclingForConditionalGeneration(config).eval()
    processor = GraniteDoclingProcessor(
        image_processor=GraniteDoclingImageProcessor(size={"height": 32, "width": 32}, max_patches=4),
        tokenizer=tokenizer,
        image_seq_len=4,
        chat_template=chat_template("<image>"),
    )
    return model, processor
