"""GOT-OCR 2.0: a tiny random-weight `GotOcr2ForConditionalGeneration` and its processor, built offline (images only).

A SAM-style vision tower (windowed attention with relative positions, one global layer, a convolutional neck) reads a
32-pixel image as 8x8 patches of 4 pixels; two stride-2 convolutions bring them to 2x2 tokens for the Qwen2 language
model. The processor writes `num_image_tokens` `<imgpad>` placeholders per image (set to the tiny tower's 4; the real
one has 256) inside the `<img>…</img>` pair its prompt holds: the expansion is placeholders only.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import GotOcr2Config, GotOcr2ForConditionalGeneration, GotOcr2ImageProcessor, GotOcr2Processor

    from pnd.testing import _tiny_llama, chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<img>", "</img>", "<imgpad>"])
    config = GotOcr2Config(
        vision_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=4, window_size=4, global_attn_indexes=[1], mlp_dim=64),
        text_config={**_tiny_llama(tokenizer), "model_type": "qwen2"},
        image_token_index=tokenizer.convert_tokens_to_ids("<imgpad>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = GotOcr2ForConditionalGeneration(config).eval()
    processor = GotOcr2Processor(
        image_processor=GotOcr2ImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        chat_template=chat_template("<img><imgpad></img>"),
    )
    processor.num_image_tokens = 4
    return model, processor
