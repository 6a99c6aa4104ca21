"""Cosmos3 Omni (the Cosmos3-Nano "Reasoner"): Qwen3-VL's architecture under its own model type (Qwen3-VL vision tower
with deepstack, qwen3_vl_text language model with interleaved 3-D M-RoPE); the family ships no processor class of its
own, its checkpoints use Qwen3-VL's (Qwen2-VL image processor, Qwen3-VL video processor, Qwen2 tokenizer)."""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Cosmos3OmniConfig, Cosmos3OmniForConditionalGeneration, Qwen3VLProcessor

    from pnd.testing import QWEN_VISION_TOKENS, qwen3_vl_processor_parts, tiny_tokenizer, vision_token_ids

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS), corpus=("<0.5 seconds> <1.5 seconds>",))
    config = Cosmos3OmniConfig(
        text_config=dict(
            model_type="qwen3_vl_text", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True,
                             "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(model_type="qwen3_vl_vision", depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                           patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                           num_position_embeddings=16, deepstack_visual_indexes=[0]),
        **vision_token_ids(tokenizer),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Cosmos3OmniForConditionalGeneration(config).eval()
    return model, Qwen3VLProcessor(tokenizer=tokenizer, **qwen3_vl_processor_parts())
