"""HyperCLOVA X Vision V2 (`hyperclovax_vision_v2`): a tiny random-weight
`HyperCLOVAXVisionV2ForConditionalGeneration` and its processor, built offline.

A Qwen2.5-VL vision tower (2 layers, one windowed) and a linear projector into a HyperCLOVA X language model (Granite-
style multipliers, post-norms, scaled logits); plain 1-D positions. The processor is Qwen2-VL's format (`<|image_pad|>`
/ `<|video_pad|>` tokens) plus, as the checkpoint's chat template writes it, the video's duration: the template writes
`"video_duration": <|video_duration|>` and the processor puts the video's duration in seconds there.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        HyperCLOVAXVisionV2Config,
        HyperCLOVAXVisionV2ForConditionalGeneration,
        HyperCLOVAXVisionV2Processor,
    )

    from pnd.testing import QWEN_VISION_TOKENS, tiny_llama_text, tiny_tokenizer, vision_token_ids
    from pnd.testing.builders.qwen2_vl import qwen2_vl_processor_parts

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS), corpus=('{"video_duration": 2.0} {"video_duration": 4.0}',))
    ids = vision_token_ids(tokenizer)
    config = HyperCLOVAXVisionV2Config(
        text_config={**tiny_llama_text(tokenizer), "model_type": "hyperclovax", "embedding_multiplier": 2.0,
                     "residual_multiplier": 0.5, "attention_multiplier": 0.25, "logits_scaling": 0.5},
        vision_config=dict(model_type="qwen2_5_vl_vision", depth=2, hidden_size=32, out_hidden_size=64,
                           intermediate_size=64, num_heads=2, patch_size=14, spatial_merge_size=2,
                           temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1]),
        image_token_id=ids["image_token_id"], video_token_id=ids["video_token_id"], tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = HyperCLOVAXVisionV2ForConditionalGeneration(config).eval()
    video = '{"video_duration": <|video_duration|>}<|vision_start|><|video_pad|><|vision_end|>'  # the checkpoint's
    return model, HyperCLOVAXVisionV2Processor(tokenizer=tokenizer, **qwen2_vl_processor_parts(video))
