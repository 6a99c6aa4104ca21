"""HunYuanVL (HunyuanOCR): a ViT with a conv patch merger and a dense HunYuan language model with xD-RoPE.

The chat template writes `<image_start><image><image_end>` (HunYuan's "hy_place holder" tokens 100, 102, 101); the
processor expands the middle one into h * (w + 1) + 2 image tokens: the merger's begin embedding, each merged row of
w patches followed by a learned newline embedding, and its end embedding. A 64-pixel image is 8x8 patches of 8
pixels, merged 2x2: 4 * 5 + 2 = 22 tokens. Positions: 4-axis xD-RoPE (sequence, width, height, image index).
"""

from __future__ import annotations

import torch

_START, _END, _IMAGE = "<｜hy_place▁holder▁no▁100｜>", "<｜hy_place▁holder▁no▁101｜>", "<｜hy_place▁holder▁no▁102｜>"


def build(seed: int):
    from transformers import (
        HunYuanVLConfig,
        HunYuanVLForConditionalGeneration,
        HunYuanVLImageProcessor,
        HunYuanVLProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    named = {"image_start_token": _START, "image_end_token": _END, "image_token": _IMAGE}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    ids = {key: tokenizer.convert_tokens_to_ids(token) for key, token in named.items()}
    [newline] = tokenizer("\n", add_special_tokens=False).input_ids
    config = HunYuanVLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            # as HunyuanOCR: "xdrope" with an NTK alpha (read as "dynamic" + alpha), 4 axes of head_dim / 8 each
            rope_parameters={"rope_type": "xdrope", "alpha": 1000.0, "factor": 1.0, "rope_theta": 10000.0,
                             "xdrope_section": [2, 2, 2, 2]},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            eod_token_id=None, sep_token_id=None, tie_word_embeddings=False,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           patch_size=8, spatial_merge_size=2, max_image_size=64, min_image_size=32,
                           out_hidden_size=64),
        image_token_id=ids["image_token"],
        im_start_id=ids["image_start_token"],
        im_end_id=ids["image_end_token"],
        im_newline_id=newline,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = HunYuanVLForConditionalGeneration(config).eval()
    processor = HunYuanVLProcessor(
        image_processor=HunYuanVLImageProcessor(min_pixels=32 * 32, max_pixels=64 * 64, patch_size=8, merge_size=2),
        tokenizer=tokenizer,
        chat_template=chat_template(_START + _IMAGE + _END),
    )
    return model, processor
