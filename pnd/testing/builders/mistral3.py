"""Mistral 3 (Mistral-Small-3.1 style): a Pixtral vision tower, a 2x2 patch merger and a Mistral language model.

A 64-pixel image is 8x8 patches of 8 pixels, merged 2x2: 4 rows of 4 `[IMG]` tokens, each row closed by `[IMG_BREAK]`
and the last by `[IMG_END]` (20 tokens).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration, PixtralImageProcessor, PixtralProcessor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["[IMG]", "[IMG_BREAK]", "[IMG_END]"])
    config = Mistral3Config(
        vision_config=dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, head_dim=16, image_size=64, patch_size=8),
        text_config={**tiny_llama_text(tokenizer), "model_type": "mistral", "head_dim": 16, "sliding_window": None},
        image_token_index=tokenizer.convert_tokens_to_ids("[IMG]"),
        spatial_merge_size=2,
        vision_feature_layer=-1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Mistral3ForConditionalGeneration(config).eval()
    processor = PixtralProcessor(
        image_processor=PixtralImageProcessor(size={"longest_edge": 64}, patch_size=16),
        tokenizer=tokenizer,
        patch_size=8,
        spatial_merge_size=2,
        chat_template=chat_template("[IMG]"),  # Mistral's template: "[IMG]"
    )
    return model, processor
