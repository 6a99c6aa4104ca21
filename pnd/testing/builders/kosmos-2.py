"""Kosmos-2 (`pnd/architectures/kosmos2.py`): a CLIP vision tower, a latent-query projection and a
sinusoidal-position text decoder; the processor writes `<s><image>` + one token per latent query (ids following
`<unk>`, ordinary vocabulary ids) + `</image>` at the start of each prompt, and `image_embeds_position_mask` marks the
latent-query slots, whose embeddings the model overwrites with the image features.

Worked around: the processor's `__init__` takes `*kwargs` (a typo for `**kwargs`), so a `chat_template` keyword fails:
set afterwards; the processor assumes a tokenizer that adds `<s>` (its mask starts after it) and has an `<unk>` (the
latent-query ids follow it): the tiny tokenizer gets both. It writes 64 latent-query slots, its default, whatever the
model's `latent_query_num` (a saved processor keeps no other count), so the tiny model keeps 64 latent queries.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from tokenizers.processors import TemplateProcessing
    from transformers import CLIPImageProcessor, Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2Processor

    from pnd.testing import chat_template, tiny_tokenizer
    from pnd.testing.parts import strengthen_latent_queries

    tokenizer = tiny_tokenizer(["<s>", "<unk>"])
    tokenizer.bos_token, tokenizer.unk_token = "<s>", "<unk>"
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", tokenizer.bos_token_id)])
    processor = Kosmos2Processor(CLIPImageProcessor(size={"shortest_edge": 32}, crop_size=32), tokenizer,
                                 num_patch_index_tokens=16)
    processor.chat_template = chat_template("")
    config = Kosmos2Config(
        text_config=dict(vocab_size=len(tokenizer), embed_dim=64, layers=2, attention_heads=2, ffn_dim=128,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        latent_query_num=64)  # the processor's default count of latent-query slots (a saved one keeps no other)
    torch.manual_seed(seed)
    model = Kosmos2ForConditionalGeneration(config).eval()
    strengthen_latent_queries(model)  # else the image barely changes the tokens
    return model, processor
