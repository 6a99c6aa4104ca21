"""LLaVA-OneVision: a tiny SigLIP vision tower and a tiny Qwen2 language model, with its processor (`**text`
overrides the language model's config)."""

from __future__ import annotations

import torch

from ..parts import chat_template, tiny_tokenizer


def build(seed: int, **text):
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    tokenizer = tiny_tokenizer(["<image>", "<video>"])
    size = {"height": 32, "width": 32}
    config = LlavaOnevisionConfig(
        vision_config=dict(
            model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, image_size=32, patch_size=8,
        ),
        text_config={
            **dict(model_type="qwen2", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                   eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id),
            **text,
        },
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        image_grid_pinpoints=[[32, 32], [32, 64], [64, 32]],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=config.image_grid_pinpoints),
        video_processor=LlavaOnevisionVideoProcessor(size=size),
        tokenizer=tokenizer,
        num_image_tokens=(32 // 8) ** 2,
        vision_feature_select_strategy="full",
        chat_template=chat_template("<image>", "<video>"),
    )
    return model, processor
