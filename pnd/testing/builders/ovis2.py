"""Ovis2: a tiny random-weight `Ovis2ForConditionalGeneration` and its processor, built offline (images only).

Ovis2's visual tokenizer reads 32-pixel tiles as 4x4 patches of 8 pixels, merged 2x2 (`hidden_stride`), and maps each
merged patch to a softmax over a visual vocabulary whose embedding table gives the token's embedding; the structure
tokens are embedded from the same table's last five rows (the visual indicators). A 64-pixel image (tiling on, at most
4 tiles) is the global view and a 2x2 grid of tiles: `<IMG_START>`, the global view's 4 `<IMG_ATOM>`, `<IMG_GRID>`, the
tiles' atoms separated by `<IMG_COL>` within a row and `<IMG_ROW>` between rows, then `<IMG_END>`. The language model
is Qwen2.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Ovis2Config, Ovis2ForConditionalGeneration, Ovis2ImageProcessor, Ovis2Processor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    indicators = ["<IMG_START>", "<IMG_GRID>", "<IMG_COL>", "<IMG_ROW>", "<IMG_END>"]
    tokenizer = tiny_tokenizer(["<image>", "<IMG_ATOM>", *indicators])
    config = Ovis2Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8, hidden_stride=2, vocab_size=64),
        text_config={**tiny_llama_text(tokenizer), "model_type": "qwen2"},
        image_token_id=tokenizer.convert_tokens_to_ids("<IMG_ATOM>"),
        visual_indicator_token_ids=tokenizer.convert_tokens_to_ids(indicators),
        vocab_size=len(tokenizer),
        hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Ovis2ForConditionalGeneration(config).eval()
    processor = Ovis2Processor(
        image_processor=Ovis2ImageProcessor(size={"height": 32, "width": 32}, crop_to_patches=True, max_patches=4),
        tokenizer=tokenizer,
        image_seq_length=4,
        chat_template=chat_template("<image>"),
    )
    return model, processor
