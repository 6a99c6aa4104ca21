"""Idefics3: a SigLIP-style vision tower, a pixel-shuffle connector (scale factor 2) and a Llama language model.

Images are split into 32-pixel tiles (4 tokens each after the pixel shuffle) plus a global view: a 64-pixel image is
2x2 tiles, each `<fake_token_around_image><row_i_col_j>` + 4 `<image>`, a newline after each tile row, then
`\\n<fake_token_around_image><global-img>` + 4 `<image>` + `<fake_token_around_image>`. No video.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3ImageProcessor, Idefics3Processor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    specials = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]
    tiles = [f"<row_{row}_col_{col}>" for row in (1, 2) for col in (1, 2)]
    tokenizer = tiny_tokenizer([*specials, *tiles], named={"image_token": "<image>"})
    config = Idefics3Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        text_config=tiny_llama_text(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,  # (32 / 8)^2 / 2^2 = 4 tokens per tile
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).eval()
    processor = Idefics3Processor(
        image_processor=Idefics3ImageProcessor(size={"longest_edge": 64}, max_image_size={"longest_edge": 32}),
        tokenizer=tokenizer,
        image_seq_len=4,
        # Idefics3's own template writes a bare "<image>" for an image part
        chat_template=chat_template("<image>"),
    )
    return model, processor
