"""Glmga (`glmga`): GLM-4.6V's model (transformers maps the type to `Glm46VForConditionalGeneration`: the GLM-4.1V
vision tower and 3-D M-RoPE `glm4v_text` language model) with Glmga's own image and video processors and GLM-4.6V's
processor (transformers has no Glmga processor class). A video is, per group of 2 frames, `<|begin_of_image|>`, image
tokens, `<|end_of_image|>` and a "T.T seconds" timestamp, inside the template's `<|begin_of_video|>…<|end_of_video|>`;
an image is `<|image|>` tokens inside `<|begin_of_image|>…<|end_of_image|>`.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Glm46VForConditionalGeneration,
        Glm46VProcessor,
        GlmgaConfig,
        GlmgaImageProcessor,
        GlmgaVideoProcessor,
    )

    from pnd.testing.builders.glm46v import glm_tokenizer

    tokenizer, ids, template = glm_tokenizer()
    config = GlmgaConfig(
        text_config=dict(
            model_type="glm4v_text", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "partial_rotary_factor": 1.0,
                             "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(model_type="glm4v_vision", depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                           patch_size=14, image_size=56, spatial_merge_size=2, temporal_patch_size=2,
                           out_hidden_size=64),
        **ids,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Glm46VForConditionalGeneration(config).eval()
    # pixel budgets count the temporal patch (2 frames for an image): a 64-px image becomes 56x56 (4 tokens), a 4-frame
    # 56-px video 2 frame groups of 4 tokens
    image_size = {"shortest_edge": 2 * 56 * 56, "longest_edge": 2 * 56 * 56}
    video_size = {"shortest_edge": 56 * 56, "longest_edge": 4 * 56 * 56}
    processor = Glm46VProcessor(
        image_processor=GlmgaImageProcessor(size=image_size),
        video_processor=GlmgaVideoProcessor(size=video_size, do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=template,
    )
    return model, processor
