"""Janus: a SigLIP-style vision tower and an MLP aligner for understanding (a VQ-VAE and heads for image generation,
unused here) and a Llama language model.

The processor writes per image `<begin_of_image>` + `<image_placeholder>` x num_image_tokens + `<end_of_image>`, the
markers included in the expansion. A 32-pixel image is 4x4 patches of 8 pixels (16 tokens). The placeholder's row of
`lm_head` is zero: the random model wrote placeholders, which a from-scratch forward over the generated text (the
brute-force reference's) takes for image slots, and crashes.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import JanusConfig, JanusForConditionalGeneration, JanusImageProcessor, JanusProcessor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    from ._pil_images import taking_tensors

    named = {"image_token": "<image_placeholder>", "boi_token": "<begin_of_image>", "eoi_token": "<end_of_image>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    config = JanusConfig(
        text_config=tiny_llama_text(tokenizer),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8,
                           mlp_ratio=2.0, projection_dim=64, depth=2, num_image_tokens=16),
        vq_config=dict(embed_dim=8, num_embeddings=16, latent_channels=32, base_channels=32, channel_multiplier=[1, 1],
                       num_res_blocks=1, num_patches=4, projection_dim=64, image_token_embed_dim=64),
        image_token_id=tokenizer.convert_tokens_to_ids("<image_placeholder>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = JanusForConditionalGeneration(config).eval()
    with torch.no_grad():  # a trained model never writes its placeholder; transformers' forward takes every one, also
        model.lm_head.weight[config.image_token_id] = 0  # a generated one, for an image slot (the reference's forwards)
    processor = taking_tensors(JanusProcessor)(
        image_processor=JanusImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        num_image_tokens=16,
        chat_template=chat_template("<image_placeholder>"),
    )
    return model, processor
