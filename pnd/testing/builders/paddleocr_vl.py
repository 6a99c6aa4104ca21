"""PaddleOCR-VL: a tiny random-weight `PaddleOCRVLForConditionalGeneration` and its processor, built offline (images
only).

A SigLIP-style tower with 2D rotary positions reads the image at its own resolution in 8-pixel patches, merged 2x2 and
projected to the ERNIE 4.5 language model, whose positions are Qwen2-VL's M-RoPE (from `mm_token_type_ids`). A 64-pixel
image is 4x4 merged tokens: the processor writes 16 `<|IMAGE_PLACEHOLDER|>` tokens inside the template's
`<|IMAGE_START|>…<|IMAGE_END|>` pair and nothing else.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        PaddleOCRVLConfig,
        PaddleOCRVLForConditionalGeneration,
        PaddleOCRVLImageProcessor,
        PaddleOCRVLProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    named = {"image_token": "<|IMAGE_PLACEHOLDER|>"}
    tokenizer = tiny_tokenizer(["<|IMAGE_START|>", "<|IMAGE_END|>", "<|IMAGE_PLACEHOLDER|>", "<|video_pad|>"],
                               named=named)
    text = {key: value for key, value in tiny_llama_text(tokenizer).items() if key != "model_type"}
    start, end, image, video = tokenizer.convert_tokens_to_ids(["<|IMAGE_START|>", "<|IMAGE_END|>",
                                                                "<|IMAGE_PLACEHOLDER|>", "<|video_pad|>"])
    config = PaddleOCRVLConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=64, patch_size=8, spatial_merge_size=2),
        text_config={**text, "head_dim": 16, "tie_word_embeddings": False, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0,
                                                                  "mrope_section": [2, 3, 3]}},
        image_token_id=image, video_token_id=video, vision_start_token_id=start, vision_end_token_id=end,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = PaddleOCRVLForConditionalGeneration(config).eval()
    processor = PaddleOCRVLProcessor(
        image_processor=PaddleOCRVLImageProcessor(min_pixels=32 * 32, max_pixels=64 * 64, patch_size=8, merge_size=2),
        tokenizer=tokenizer,
        chat_template=chat_template("<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>"),
    )
    return model, processor
