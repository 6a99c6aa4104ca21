"""ERNIE 4.5 VL MoE: a 2-D-RoPE ViT, a spatial + temporal resampler (2x2 patches, 2 frames per token for videos) and a
language model with 3-D M-RoPE (ERNIE's [h, w, t] section layout) whose MoE layers route text and visual tokens to
separate expert sets (text_moe / vision_moe, chosen by the processor's moe_mm_token_type_ids) plus shared experts;
the first layer is dense, as in the checkpoints. The template writes "Picture 1:<|IMAGE_START|>...<|IMAGE_END|>" /
"Video 1:<|VIDEO_START|>...<|VIDEO_END|>"; the processor only repeats the placeholder token."""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Ernie4_5_VLMoeConfig,
        Ernie4_5_VLMoeForConditionalGeneration,
        Ernie4_5_VLMoeImageProcessor,
        Ernie4_5_VLMoeProcessor,
        Ernie4_5_VLMoeVideoProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    named = {"image_token": "<|IMAGE_PLACEHOLDER|>", "image_start_token": "<|IMAGE_START|>",
             "image_end_token": "<|IMAGE_END|>", "video_token": "<|VIDEO_PLACEHOLDER|>",
             "video_start_token": "<|VIDEO_START|>", "video_end_token": "<|VIDEO_END|>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named, corpus=("Picture 1: Video 1:",))
    config = Ernie4_5_VLMoeConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,  # head_dim = 64 / 4 = 16
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [3, 3, 2]},
            mlp_layer_types=["dense", "sparse", "sparse"], moe_num_experts=4, moe_k=2,
            moe_intermediate_size=[32, 16], moe_num_shared_experts=2,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            tie_word_embeddings=False,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14,
                           spatial_merge_size=2, temporal_merge_size=2,
                           rope_parameters={"rope_type": "axial", "rope_theta": 10000.0}),
        image_token_id=tokenizer.image_token_id,
        image_start_token_id=tokenizer.image_start_token_id,
        image_end_token_id=tokenizer.image_end_token_id,
        video_token_id=tokenizer.video_token_id,
        video_start_token_id=tokenizer.video_start_token_id,
        video_end_token_id=tokenizer.video_end_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Ernie4_5_VLMoeForConditionalGeneration(config).eval()
    # 28-pixel merge blocks: a 64-px image becomes 56x56 (4 tokens); a 4-frame 56-px video 2 frame pairs of 4 tokens.
    # The real video processor also draws each frame's timestamp onto its pixels with a TrueType font shipped with
    # the checkpoint; there is none offline, so no drawing (the tokens are the same either way).
    size = {"shortest_edge": 56 * 56, "longest_edge": 56 * 56}
    processor = Ernie4_5_VLMoeProcessor(
        image_processor=Ernie4_5_VLMoeImageProcessor(size=size),
        video_processor=Ernie4_5_VLMoeVideoProcessor(size=size, do_sample_frames=False, draw_on_frames=False),
        tokenizer=tokenizer,
        chat_template=chat_template("Picture 1:<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>",
                                    "Video 1:<|VIDEO_START|><|VIDEO_PLACEHOLDER|><|VIDEO_END|>"),
    )
    return model, processor
