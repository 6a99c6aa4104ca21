"""Muse Glimmer: a windowed ViT with pixel-shuffle merging and a Gemma-2-like language model (sliding-window layers
around a NoPE full-attention layer, scale-less QK-norm, gated attention output, tanh-capped logits); 1-D positions.

A 64-pixel image becomes 2x2 merged tokens inside `<|image_start|>...<|image_end|>`; a 4-frame 56-pixel video 2
groups of 2 frames, each `Time: Xs` and 4 tokens, between `<|vid_start|>`, `<|vid_frame_separator|>` and
`<|vid_end|>`.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        MuseGlimmerConfig,
        MuseGlimmerForConditionalGeneration,
        MuseGlimmerImageProcessor,
        MuseGlimmerProcessor,
        MuseGlimmerVideoProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    specials = ["<|patch|>", "<|image_start|>", "<|image_end|>", "<|video|>", "<|vid_start|>", "<|vid_end|>",
                "<|vid_frame_separator|>"]
    tokenizer = tiny_tokenizer(specials, corpus=("Time: 0.0s Time: 1.0s",))
    theta = 10000.0
    config = MuseGlimmerConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": theta},
            # the real pattern: sliding-window RoPE layers, every 4th layer full attention without RoPE (NoPE)
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            layer_rope_theta=[theta, 0, theta],
            sliding_window=6,  # prompts: ~25 tokens
            output_multiplier=(64 / 256) ** -0.5,  # 1/sqrt(hidden_size/256), as the released checkpoint
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(patch_size=14, pos_emb_height=4, pos_emb_width=4, max_position_embeddings=16,
                           num_attention_heads=2, num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                           patch_temporal=2, merge_size=2),  # layers: window attention (56-pixel windows), full
        image_token_id=tokenizer.convert_tokens_to_ids("<|patch|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video|>"),
        out_hidden_size=32 * 2 * 2,  # vision width after the 2x2 pixel shuffle
        projector_hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = MuseGlimmerForConditionalGeneration(config).eval()
    common = dict(patch_size=14, temporal_patch_size=2, merge_size=2)
    processor = MuseGlimmerProcessor(
        image_processor=MuseGlimmerImageProcessor(max_image_tokens=4, **common),
        video_processor=MuseGlimmerVideoProcessor(max_video_frame_tokens=4, do_sample_frames=False, return_metadata=True,
                                                  **common),  # the processor reads the timestamps from the metadata
        tokenizer=tokenizer,
        # one placeholder per image or video in the template; the processor adds the begin/end markers
        chat_template=chat_template("<|patch|>", "<|video|>"),
    )
    return model, processor
