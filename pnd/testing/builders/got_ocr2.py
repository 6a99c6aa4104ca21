"""GOT-OCR 2.0: a tiny random-weight `GotOcr2ForConditionalGeneration` and its processor, built offline (images only).

A SAM-style tower (windowed attention with relative positions, a convolutional neck) reads a 256-pixel image as
64x64 patches of 4 pixels; two stride-2 convolutions bring them to 16x16 tokens for the Qwen2 language model. The chat
template writes `<img><imgpad></img>` and the processor replaces the `<imgpad>` with `num_image_tokens` of them per
image and nothing else: 256, the real model's count, which a saved processor does not keep otherwise (its `__init__`
drops the argument), so the tiny tower makes 256 tokens too, in windowed layers only (the real one has global
layers). Its processor takes a flat list of images, one per prompt (a nested list needs `multi_page=True`).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import GotOcr2Config, GotOcr2ForConditionalGeneration, GotOcr2ImageProcessor, GotOcr2Processor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<img>", "</img>", "<imgpad>"])
    config = GotOcr2Config(
        vision_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                           image_size=256, patch_size=4, window_size=4, global_attn_indexes=[], mlp_dim=64,
                           initializer_range=0.02),  # the config's 1e-10 leaves a random tower blind to the image
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen2"},
        image_token_index=tokenizer.convert_tokens_to_ids("<imgpad>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = GotOcr2ForConditionalGeneration(config).eval()
    processor = GotOcr2Processor(image_processor=GotOcr2ImageProcessor(size={"height": 256, "width": 256}),
                                 tokenizer=tokenizer, chat_template=chat_template("<img><imgpad></img>"))
    return model, processor
