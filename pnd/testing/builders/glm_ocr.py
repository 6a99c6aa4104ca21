"""GLM-OCR: a tiny random-weight `GlmOcrForConditionalGeneration` with GLM-4.6V's processor (the one GLM-OCR's
checkpoint names), built offline.

GLM-4.1V's vision tower format (14-pixel patches, 2 frames per temporal patch, merged 2x2) on GLM-OCR's own tower and
M-RoPE language model (`glm_ocr_text`). An image is `<|image|>` tokens inside the template's
`<|begin_of_image|>…<|end_of_image|>`; a video is, inside the template's `<|begin_of_video|>…<|end_of_video|>`, per
frame group `<|begin_of_image|>` + `<|image|>` tokens + `<|end_of_image|>` + a `t seconds` timestamp (GLM-4.6V's
format).
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Glm46VImageProcessor,
        Glm46VProcessor,
        Glm46VVideoProcessor,
        GlmOcrConfig,
        GlmOcrForConditionalGeneration,
    )

    from pnd.testing.builders.glm46v import glm_tokenizer

    tokenizer, ids, template = glm_tokenizer()
    config = GlmOcrConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         head_dim=16, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3],
                                          "partial_rotary_factor": 1.0, "rope_theta": 10000.0},
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14, image_size=56,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64),
        **ids,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = GlmOcrForConditionalGeneration(config).eval()
    # as GLM-4.6V's builder: a 64-px image becomes 56x56 (4 tokens), a 4-frame 56-px video 2 frame groups of 4 tokens
    processor = Glm46VProcessor(
        image_processor=Glm46VImageProcessor(size={"shortest_edge": 2 * 56 * 56, "longest_edge": 2 * 56 * 56}),
        video_processor=Glm46VVideoProcessor(size={"shortest_edge": 56 * 56, "longest_edge": 4 * 56 * 56},
                                             do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=template,
    )
    return model, processor
