"""MiniMax-M3 VL: a CLIP-like vision tower with 3-D RoPE and a patch-merging projector, and the M3 language model
(block-sparse attention chosen by a lightning indexer on both sides of a full-attention layer, Gemma-style QK-norm,
partial RoPE, a dense first MLP then MoE with a shared expert); 1-D positions.

A 64-pixel image is resized to 56 pixels, 4x4 patches merged 2x2: 4 tokens inside `]<]start of image[>[` and
`]<]end of image[>[`. A 4-frame 56-pixel video is 2 groups of 2 frames, each `]<]t seconds[>[` and the same block of 4.
The indexer scores blocks of 4 keys and keeps 2 of them plus the query's own, so that on ~40-token prompts the sparse
layers do drop keys.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        MiniMaxM3SparseForConditionalGeneration,
        MiniMaxM3VLConfig,
        MiniMaxM3VLImageProcessor,
        MiniMaxM3VLProcessor,
        MiniMaxM3VLVideoProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    image, video = MiniMaxM3VLProcessor.IMAGE_TOKEN, MiniMaxM3VLProcessor.VIDEO_TOKEN
    start, end = MiniMaxM3VLProcessor.VISION_START_TOKEN, MiniMaxM3VLProcessor.VISION_END_TOKEN
    tokenizer = tiny_tokenizer([image, video, start, end], corpus=("]<]0.0 seconds[>[ ]<]1.0 seconds[>[",))
    config = MiniMaxM3VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            rotary_dim=8,  # half the head, as the real model (64 of 128)
            layer_types=["minimax_m3_sparse", "full_attention", "minimax_m3_sparse"],
            mlp_layer_types=["dense", "sparse", "sparse"],
            dense_intermediate_size=128, shared_intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
            # the indexer has one head per key-value head
            index_n_heads=2, index_head_dim=16, index_block_size=4, index_topk_blocks=2, index_local_blocks=1,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=56, patch_size=14, temporal_patch_size=2, spatial_merge_size=2),
        image_token_index=tokenizer.convert_tokens_to_ids(image),
        video_token_index=tokenizer.convert_tokens_to_ids(video),
        projector_hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = MiniMaxM3SparseForConditionalGeneration(config).eval()
    pixels = dict(min_pixels=56 * 56, max_pixels=56 * 56)
    processor = MiniMaxM3VLProcessor(
        image_processor=MiniMaxM3VLImageProcessor(patch_size=14, merge_size=2, temporal_patch_size=2, **pixels),
        # the processor does not resize videos (its default): 56-pixel frames are 4x4 patches
        video_processor=MiniMaxM3VLVideoProcessor(patch_size=14, merge_size=2, temporal_patch_size=2, **pixels),
        tokenizer=tokenizer,
        # one placeholder per image or video in the template; the processor adds the begin/end markers and timestamps
        chat_template=chat_template(image, video),
    )
    return model, processor
