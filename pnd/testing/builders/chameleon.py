"""Chameleon: an image becomes discrete tokens of a VQ-VAE (its codes mapped to vocabulary tokens), embedded by the
language model's own embedding table; no vision tower, no projector. The language model is the base model itself.

The processor writes `<racm3:break>` + `<image>` x image_seq_length + `<eoss>` per image (the VQ span and its begin/end
markers; the VQ codes replace the `<image>` embeddings in the forward), and appends its sep token to every prompt. A
16-pixel image is 4x4 codes of a VQ-VAE that downsamples 4x (16 tokens). The 16 VQ codes are special tokens
`IMGIMG<digits as letters>Z` of the tokenizer, as in the real vocabulary map; the forward sets their logits to the
dtype's minimum (a text model never writes image tokens).
"""

from __future__ import annotations

import torch

_CODES = 16


def _code_name(code: int) -> str:
    """The vocabulary name of VQ code `code` (Chameleon's `bpe2img` reads digits written as letters A-J)."""
    return "IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z"


def build(seed: int):
    from transformers import (
        ChameleonConfig,
        ChameleonForConditionalGeneration,
        ChameleonImageProcessor,
        ChameleonProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    named = {"image_token": "<image>", "boi_token": "<racm3:break>", "eoi_token": "<eoss>"}
    tokenizer = tiny_tokenizer([*named.values(), "<reserved08706>", *map(_code_name, range(_CODES))], named=named)
    tokenizer.sep_token = "<reserved08706>"
    config = ChameleonConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        vocabulary_map={**tokenizer.get_vocab()},
        vq_config=dict(embed_dim=8, num_embeddings=_CODES, latent_channels=32, resolution=16, base_channels=32,
                       channel_multiplier=[1, 1, 1], num_res_blocks=1, attn_resolutions=[]),
    )
    torch.manual_seed(seed)
    model = ChameleonForConditionalGeneration(config).eval()
    processor = ChameleonProcessor(
        image_processor=ChameleonImageProcessor(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16}),
        tokenizer=tokenizer, image_seq_length=16)
    processor.chat_template = chat_template("<image>")
    return model, processor
