"""Command A Vision (`cohere2_vision`): a tiny random-weight `Cohere2VisionForConditionalGeneration` and its processor,
built offline (images only: the family has no video processor).

A SigLIP tower reads 32-pixel tiles of 8-pixel patches (4x4), pixel-shuffled 2x2 and projected (SwiGLU) to 2x2 tokens
per tile. A 64-pixel image is cropped to a 2x2 grid of tiles plus a thumbnail: `<|START_OF_IMG|>`, per tile four
`<|IMG_PATCH|>` then `<|IMG_LINE_BREAK|>`, then `<|END_OF_IMG|>` (27 tokens). The Cohere 2 language model keeps its
layer mix: a sliding-window layer and a full-attention layer.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Cohere2VisionConfig, Cohere2VisionForConditionalGeneration, Cohere2VisionProcessor
    from transformers.models.cohere2_vision.image_processing_cohere2_vision import Cohere2VisionImageProcessor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    named = {"boi_token": "<|START_OF_IMG|>", "eoi_token": "<|END_OF_IMG|>", "image_token": "<|IMG_PATCH|>",
             "img_line_break_token": "<|IMG_LINE_BREAK|>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    config = Cohere2VisionConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8),
        text_config={**tiny_llama_text(tokenizer), "model_type": "cohere2", "layer_types": ["sliding_attention",
                                                                                         "full_attention"],
                     "sliding_window": 16, "logit_scale": 1.0},
        downsample_factor=2,
        alignment_intermediate_size=64,
        image_token_id=tokenizer.image_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Cohere2VisionForConditionalGeneration(config).eval()
    processor = Cohere2VisionProcessor(
        image_processor=Cohere2VisionImageProcessor(size={"height": 32, "width": 32}, patch_size=2, max_patches=4),
        tokenizer=tokenizer,
        chat_template=chat_template("<|IMG_PATCH|>"),
    )
    return model, processor
