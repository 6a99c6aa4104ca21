"""PP-Chart2Table: a tiny random-weight GOT-OCR 2.0 model (`GotOcr2ForConditionalGeneration`, the class
transformers maps `pp_chart2table` to) and PP-Chart2Table's processor, built offline (images only).

A SAM-style tower (windowed attention with relative positions, one global layer, a convolutional neck) reads a
32-pixel image as 8x8 patches of 4 pixels; two stride-2 convolutions bring them to 2x2 tokens for the Qwen2 language
model. PP-Chart2Table's processor replaces nothing (it tokenizes the text and preprocesses the image), so the prompt
must hold one `<imgpad>` per image feature: the tiny chat template writes `<img>`, 4 `<imgpad>` and `</img>` (the real
model takes 256); the expansion is the placeholder tokens, found by their id.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        AutoModelForImageTextToText,
        PPChart2TableConfig,
        PPChart2TableImageProcessor,
        PPChart2TableProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<img>", "</img>", "<imgpad>"])
    config = PPChart2TableConfig(
        vision_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=4, window_size=4, global_attn_indexes=[1], mlp_dim=64,
                           initializer_range=0.02),  # the config's 1e-10 leaves a random tower blind to the image
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen2"},
        image_token_index=tokenizer.convert_tokens_to_ids("<imgpad>"),
        image_seq_length=4,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    processor = PPChart2TableProcessor(
        image_processor=PPChart2TableImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        chat_template=chat_template("<img>" + "<imgpad>" * 4 + "</img>"),
    )
    return model, processor
