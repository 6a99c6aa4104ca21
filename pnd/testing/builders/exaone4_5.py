"""EXAONE 4.5 (`exaone4_5`): a tiny random-weight `Exaone4_5_ForConditionalGeneration` and its processor, built offline.

Qwen2-VL's processor format (`<|image_pad|>` / `<|video_pad|>` tokens inside the template's
`<|vision_start|>…<|vision_end|>` pair) on a Qwen2.5-VL style tower with grouped-query attention (2 layers, one of
them windowed); plain 1-D positions (no M-RoPE). The EXAONE 4 language model keeps its layer mix: a sliding-window
layer (with RoPE) and a full-attention layer (without RoPE, as EXAONE 4's global layers).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Exaone4_5_Config,
        Exaone4_5_ForConditionalGeneration,
        Exaone4_5_Processor,
    )

    from pnd.testing import QWEN_VISION_TOKENS, tiny_llama_text, tiny_tokenizer, vision_token_ids
    from pnd.testing.builders.qwen2_vl import qwen2_vl_processor_parts

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS))
    ids = vision_token_ids(tokenizer)
    config = Exaone4_5_Config(
        text_config={**tiny_llama_text(tokenizer), "model_type": "exaone4", "sliding_window": 16,
                     "layer_types": ["sliding_attention", "full_attention"]},
        vision_config=dict(depth=2, hidden_size=32, out_hidden_size=64, intermediate_size=64, num_heads=2,
                           num_key_value_heads=1, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                           window_size=56, fullatt_block_indexes=[1]),
        image_token_id=ids["image_token_id"], video_token_id=ids["video_token_id"],
    )
    torch.manual_seed(seed)
    model = Exaone4_5_ForConditionalGeneration(config).eval()
    return model, Exaone4_5_Processor(tokenizer=tokenizer, **qwen2_vl_processor_parts())
