"""Cohere Compass (North Vision): a Qwen3-VL-style vision tower (axial 2-D RoPE, deepstack mergers) and a Cohere2-style
language model: parallel attention + MLP blocks under one LayerNorm, per-layer-type RoPE (interleaved 3-D M-RoPE on
the sliding-window layers, none on the full-attention layer, as Cohere2's NoPE global layers) and no q/k norms. A video
is written as `<T.T seconds><|VISION_START|>` tokens `<|VISION_END|>` per 2-frame group, inside the template's own
`<|VISION_START|><|VIDEO_PAD|><|VISION_END|>` (the template of the family's checkpoints)."""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        CohereCompassConfig,
        CohereCompassForConditionalGeneration,
        CohereCompassImageProcessor,
        CohereCompassProcessor,
        CohereCompassVideoProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer, vision_token_ids

    specials = ["<|VISION_START|>", "<|VISION_END|>", "<|IMAGE_PAD|>", "<|VIDEO_PAD|>"]
    tokenizer = tiny_tokenizer(specials, corpus=("<0.2 seconds> <1.2 seconds>",))
    mrope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
    config = CohereCompassConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,  # head_dim = 64 / 4 = 16
            layer_types=["sliding_attention", "full_attention", "sliding_attention"], sliding_window=16,  # < the prompts (25-46)
            rope_parameters={"sliding_attention": mrope, "full_attention": None},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            tie_word_embeddings=False,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                           num_position_embeddings=16, deepstack_visual_indexes=[0],
                           rope_parameters={"rope_type": "axial", "rope_theta": 10000.0}),
        **vision_token_ids(tokenizer, specials),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = CohereCompassForConditionalGeneration(config).eval()
    # 32-pixel merge blocks: a 64-px image is 4 tokens; a 4-frame 56-px video is 2 frame groups of 4 tokens
    processor = CohereCompassProcessor(
        image_processor=CohereCompassImageProcessor(patch_size=16, size={"shortest_edge": 64 * 64,
                                                                          "longest_edge": 64 * 64}),
        video_processor=CohereCompassVideoProcessor(size={"shortest_edge": 32 * 32, "longest_edge": 4 * 64 * 64},
                                                    do_sample_frames=False, cap_pixels_per_frame=True),
        tokenizer=tokenizer,
        chat_template=chat_template("<|VISION_START|><|IMAGE_PAD|><|VISION_END|>",
                                    "<|VISION_START|><|VIDEO_PAD|><|VISION_END|>"),
    )
    return model, processor
