"""ViP-LLaVA: LLaVA-1.5 with a projector over several vision layers' features (concatenated, layer-normed); LLaVA's
processor, which writes `<image>` tokens only. A 32-pixel image is 4x4 patches of 8 pixels (16 tokens, the class
token dropped).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import CLIPImageProcessor, LlavaProcessor, VipLlavaConfig, VipLlavaForConditionalGeneration

    from pnd.testing import TINY_CLIP, chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>"])
    config = VipLlavaConfig(
        vision_config=TINY_CLIP,
        text_config=tiny_llama_text(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=[-2, -1],
        image_seq_length=16,
    )
    torch.manual_seed(seed)
    model = VipLlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=chat_template("<image>"),
    )
    return model, processor
