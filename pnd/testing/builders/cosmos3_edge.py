"""Cosmos3 Edge: a packed SigLIP2-style vision tower, a 2x2 patch-merger projector and a dense ReLU^2 language model with
interleaved 3-D M-RoPE; a video is written as one `<T.T seconds><|vision_start|>` tokens `<|vision_end|>` span per
frame (temporal patch 1), replacing the template's whole `<|vision_start|><|video_pad|><|vision_end|>` wrapper."""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Cosmos3EdgeConfig,
        Cosmos3EdgeForConditionalGeneration,
        Cosmos3EdgeImageProcessor,
        Cosmos3EdgeProcessor,
        Cosmos3EdgeVideoProcessor,
    )

    from pnd.testing import QWEN_VISION_TOKENS, chat_template, tiny_tokenizer, vision_token_ids

    timestamps = "<0.0 seconds> <0.5 seconds> <1.0 seconds> <1.5 seconds>"
    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS), corpus=(timestamps,))
    config = Cosmos3EdgeConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           patch_size=16, num_patches=16, spatial_merge_size=2),
        projector_hidden_size=64,
        **vision_token_ids(tokenizer),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Cosmos3EdgeForConditionalGeneration(config).eval()
    # 32-pixel merge blocks: a 64-px image is 2x2 blocks (4 tokens); a 56-px frame is resized to 64 px (4 tokens/frame)
    processor = Cosmos3EdgeProcessor(
        image_processor=Cosmos3EdgeImageProcessor(size={"shortest_edge": 32 * 32, "longest_edge": 64 * 64}),
        video_processor=Cosmos3EdgeVideoProcessor(size={"shortest_edge": 32 * 32, "longest_edge": 4 * 64 * 64},
                                                  do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>",
                                    "<|vision_start|><|video_pad|><|vision_end|>"),
    )
    # the processor class sets neither default, yet needs both: replace_video_token reads the video metadata (for the
    # timestamps) and generate/forward refuse visual inputs without mm_token_type_ids (for M-RoPE)
    processor.videos_kwargs = {"return_metadata": True}
    processor.return_mm_token_type_ids = True
    return model, processor
