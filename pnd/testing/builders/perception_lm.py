"""PerceptionLM: a tiny model and its processor."""

from __future__ import annotations

import torch

from ..parts import chat_template, tiny_llama_text, tiny_tokenizer


def build(seed: int):
    from transformers import (
        PerceptionLMConfig,
        PerceptionLMForConditionalGeneration,
        PerceptionLMImageProcessor,
        PerceptionLMProcessor,
        PerceptionLMVideoProcessor,
    )

    tokenizer = tiny_tokenizer(["<|image|>", "<|video|>"], named={"image_token": "<|image|>", "video_token": "<|video|>"})
    config = PerceptionLMConfig(  # a timm ViT built from its config: no weights downloaded
        vision_config={"model_type": "timm_wrapper", "architecture": "vit_tiny_patch16_224", "num_classes": 0,
                       "model_args": {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 1, "num_heads": 2,
                                      "class_token": True, "global_pool": ""}},
        text_config=tiny_llama_text(tokenizer),
        vision_use_cls_token=True,
        projector_pooling_ratio=2,
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
    )
    torch.manual_seed(seed)
    model = PerceptionLMForConditionalGeneration(config).eval()
    processor = PerceptionLMProcessor(
        image_processor=PerceptionLMImageProcessor(tile_size=32, max_num_tiles=1),
        video_processor=PerceptionLMVideoProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        pooling_ratio=2,
        chat_template=chat_template("<|image|>", "<|video|>"),
    )
    return model, processor
