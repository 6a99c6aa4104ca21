"""Muse Spark: Muse Glimmer's vision tower, image/video processors and prompt format (an image
`<|image_start|>…<|image_end|>`, a video `<|vid_start|>`, per frame group `Time: t.ts` and `<|video|>` tokens, groups
separated by `<|vid_frame_separator|>`, then `<|vid_end|>`), a Muse Glimmer-like language model with mixture-of-experts
MLPs (a dense first layer, then sparse) and sliding-window RoPE layers around a NoPE full-attention layer; 1-D positions.
The audio tower is built (a tiny 2-stage pyramid) but the tests give no audio.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        MuseGlimmerImageProcessor,
        MuseGlimmerVideoProcessor,
        MuseSparkConfig,
        MuseSparkFeatureExtractor,
        MuseSparkForConditionalGeneration,
        MuseSparkProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    specials = ["<|patch|>", "<|image_start|>", "<|image_end|>", "<|video|>", "<|vid_start|>", "<|vid_end|>",
                "<|vid_frame_separator|>", "<|audio|>", "<|soft_audio_start|>", "<|soft_audio_end|>"]
    tokenizer = tiny_tokenizer(specials, corpus=("Time: 0.0s Time: 1.0s",))
    theta = 10000.0
    config = MuseSparkConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": theta},
            # the real pattern: sliding-window RoPE layers, every 4th layer full attention without RoPE (NoPE)
            layer_types=["sliding_attention", "full_attention", "sliding_attention"], layer_rope_theta=[theta, 0, theta],
            mlp_layer_types=["dense", "sparse", "sparse"], moe_intermediate_size=32, moe_hidden_size=32,
            num_local_experts=4, num_experts_per_tok=2,
            sliding_window=6,  # prompts: ~25 tokens
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(patch_size=14, pos_emb_height=4, pos_emb_width=4, max_position_embeddings=16,
                           num_attention_heads=2, num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                           patch_temporal=2, merge_size=2),
        audio_config=dict(patch_sizes=(4, 4), hidden_sizes=(16, 32), depths=(1, 1), num_hidden_layers=2,
                          out_hidden_size=64),
        image_token_id=tokenizer.convert_tokens_to_ids("<|patch|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video|>"),
        audio_token_id=tokenizer.convert_tokens_to_ids("<|audio|>"),
        out_hidden_size=32 * 2 * 2,  # vision width after the 2x2 pixel shuffle
        projector_hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = MuseSparkForConditionalGeneration(config).eval()
    common = dict(patch_size=14, temporal_patch_size=2, merge_size=2)
    processor = MuseSparkProcessor(
        image_processor=MuseGlimmerImageProcessor(max_image_tokens=4, **common),
        video_processor=MuseGlimmerVideoProcessor(max_video_frame_tokens=4, do_sample_frames=False, return_metadata=True,
                                                  **common),  # the processor reads the timestamps from the metadata
        feature_extractor=MuseSparkFeatureExtractor(samples_per_token=16),
        tokenizer=tokenizer,
        chat_template=chat_template("<|patch|>", "<|video|>"),
    )
    return model, processor
