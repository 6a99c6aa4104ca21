"""LLaVA-1.5 and ViP-LLaVA (`model_type`): a tiny CLIP vision tower and a tiny Llama language model, LLaVA's processor
(`<image>` tokens only); images only. ViP-LLaVA's projector reads several vision layers' features (concatenated,
layer-normed). A 32-pixel image is 4x4 patches of 8 pixels (16 tokens, the class token dropped).
"""

from __future__ import annotations

import torch

from ..parts import TINY_CLIP, chat_template, tiny_llama_text, tiny_tokenizer


def build(seed: int, model_type: str = "llava"):
    from transformers import (
        CLIPImageProcessor,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        VipLlavaConfig,
        VipLlavaForConditionalGeneration,
    )

    tokenizer = tiny_tokenizer(["<image>"])
    config_class, model_class, own = {
        "llava": (LlavaConfig, LlavaForConditionalGeneration,
                  dict(vision_feature_layer=-1, vision_feature_select_strategy="default")),
        "vipllava": (VipLlavaConfig, VipLlavaForConditionalGeneration,
                     dict(vision_feature_layer=[-2, -1], image_seq_length=16)),
    }[model_type]
    config = config_class(vision_config=TINY_CLIP, text_config=tiny_llama_text(tokenizer),
                          image_token_index=tokenizer.convert_tokens_to_ids("<image>"), **own)
    torch.manual_seed(seed)
    model = model_class(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template("<image>"),
    )
    return model, processor
