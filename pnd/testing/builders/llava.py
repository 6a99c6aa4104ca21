"""LLaVA-1.5: a tiny CLIP vision tower and a tiny Llama language model; images only."""

from __future__ import annotations

import torch

from ..parts import TINY_CLIP, chat_template, tiny_llama_text, tiny_tokenizer


def build(seed: int):
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = tiny_tokenizer(["<image>"])
    config = LlavaConfig(
        vision_config=TINY_CLIP,
        text_config=tiny_llama_text(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template("<image>"),
    )
    return model, processor
