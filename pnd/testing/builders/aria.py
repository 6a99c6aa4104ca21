"""Aria: a tiny random-weight `AriaForConditionalGeneration` and its processor, built offline (images only).

Aria's processor resizes every image to 980 pixels (its `max_image_size`, 490 or 980 only); an Idefics3 vision tower
with 70-pixel patches reads it as 14x14 patches, and the projector's 4 learned queries cross-attend to them (the
real 4900 patches to 256 queries, here 196 to 4). The processor writes 4 `<|img|>` placeholders per image and nothing
else. The language model is Aria's mixture of experts (routed and shared experts in every layer).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import AriaConfig, AriaForConditionalGeneration, AriaImageProcessor, AriaProcessor

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<|img|>"], named={"image_token": "<|img|>"})
    patches = {7 * 7: 2, 14 * 14: 4}  # 490 and 980 pixels in 70-pixel patches: queries
    text = {key: value for key, value in tiny_llama_text(tokenizer).items() if key != "model_type"}
    config = AriaConfig(
        vision_config=dict(model_type="idefics3_vision", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=980, patch_size=70),
        text_config={**text, "intermediate_size": 64, "moe_num_experts": 4, "moe_topk": 2,
                     "moe_num_shared_experts": 1},
        projector_patch_to_query_dict=patches,
        image_token_index=tokenizer.image_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AriaForConditionalGeneration(config).eval()
    processor = AriaProcessor(
        image_processor=AriaImageProcessor(),
        tokenizer=tokenizer,
        size_conversion={490: 2, 980: 4},
        chat_template=chat_template("<|img|>"),
    )
    return model, processor
