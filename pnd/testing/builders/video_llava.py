"""Video-LLaVA: tiny CLIP image and video towers and a tiny Llama language model."""

from __future__ import annotations

import torch

from ..parts import TINY_CLIP, chat_template, tiny_llama_text, tiny_tokenizer


def build(seed: int):
    from transformers import (
        VideoLlavaConfig,
        VideoLlavaForConditionalGeneration,
        VideoLlavaImageProcessor,
        VideoLlavaProcessor,
        VideoLlavaVideoProcessor,
    )

    tokenizer = tiny_tokenizer(["<image>", "<video>"])
    config = VideoLlavaConfig(
        vision_config=TINY_CLIP,
        text_config=tiny_llama_text(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_layer=-1,
        image_seq_length=16,
        video_seq_length=4 * 17,
    )
    torch.manual_seed(seed)
    model = VideoLlavaForConditionalGeneration(config).eval()
    crop = dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = VideoLlavaProcessor(
        image_processor=VideoLlavaImageProcessor(**crop),
        video_processor=VideoLlavaVideoProcessor(**crop),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template("<image>", "<video>"),
    )
    return model, processor
