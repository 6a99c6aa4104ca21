"""Kosmos-2.5 (`pnd/architectures/kosmos2.py`): a Pix2Struct-style vision tower on flattened patches, a latent-query
projection and Kosmos-2's sinusoidal-position text decoder; the processor writes `<s><image>` + one `<s>` per latent
query + `</image>` before each text, and `image_embeds_position_mask` marks the latent-query slots (1) and the two tags
(-1), whose embeddings get the image segment's.

The tiny tokenizer names `boi_token`, `eoi_token` and `image_token` as the processor reads them, and adds no `<s>` of
its own (the processor writes it). 4x4-pixel patches, at most 16 per image (the processor's class default, 4096,
overrides its image processor's: set on the processor, which a saved processor forgets, so the vision tower keeps its
4096 patch rows and columns); 16 latent queries. At init the image's features barely reach
the last token: `pnd.testing.parts.strengthen_latent_queries`.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Kosmos2_5Config,
        Kosmos2_5ForConditionalGeneration,
        Kosmos2_5ImageProcessor,
        Kosmos2_5Processor,
    )

    from pnd.testing import chat_template, tiny_tokenizer
    from pnd.testing.parts import strengthen_latent_queries

    tokenizer = tiny_tokenizer(["<s>", "<image>", "</image>"],
                               named={"boi_token": "<image>", "eoi_token": "</image>", "image_token": "<s>"})
    tokenizer.bos_token = "<s>"
    queries = 16
    processor = Kosmos2_5Processor(Kosmos2_5ImageProcessor(patch_size={"height": 4, "width": 4}, max_patches=16),
                                   tokenizer, num_image_tokens=queries)
    processor.images_kwargs = {**processor.images_kwargs, "max_patches": 16}  # its class default (4096) overrides
    processor.chat_template = chat_template("")
    config = Kosmos2_5Config(
        text_config=dict(vocab_size=len(tokenizer), embed_dim=64, layers=2, attention_heads=2, ffn_dim=128,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id),
        vision_config=dict(hidden_size=32, patch_embed_hidden_size=48, intermediate_size=64, head_dim=16,
                           num_hidden_layers=2, num_attention_heads=2),
        latent_query_num=queries)
    torch.manual_seed(seed)
    model = Kosmos2_5ForConditionalGeneration(config).eval()
    strengthen_latent_queries(model)
    return model, processor
