"""Kimi K2.5: MoonViT-3D (temporal chunks pooled into one block of tokens) and a DeepSeek-V3 language model (MLA
attention with a low-rank query, MoE after a first dense layer); 1-D positions.

A 64-pixel image is padded to 84 pixels: 6x6 patches, 9 tokens. A 4-frame 56-pixel video is cut into chunks of one
frame, each a timestamp, `<|media_begin|>video<|media_content|>`, 4 tokens and `<|media_end|>`. The real model pools
chunks of 4 frames, but transformers' `Kimi_K25Model.get_image_features` splits the pooled features by `t*h*w/4`
instead of `h*w/4`, so any chunk of more than one frame fails there.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Kimi_K25Config,
        Kimi_K25ForConditionalGeneration,
        Kimi_K25ImageProcessor,
        Kimi_K25Processor,
        Kimi_K25VideoProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    named = {"image_token": "<|media_pad|>", "video_token": "<|kimi_k25_video_placeholder|>"}
    specials = ["<|media_begin|>", "<|media_content|>", "<|media_end|>", *named.values()]
    tokenizer = tiny_tokenizer(specials, named=named, corpus=("image video 00:00:00.000 00:00:00.500 00:00:01.000 00:00:01.500",))
    begin, end = tokenizer.convert_tokens_to_ids(["<|media_begin|>", "<|media_end|>"])
    config = Kimi_K25Config(
        text_config=dict(
            model_type="deepseek_v3", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
            moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            n_shared_experts=1, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
            first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=8, qk_rope_head_dim=8,
            v_head_dim=16, max_position_embeddings=1024, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(patch_size=14, pos_emb_height=8, pos_emb_width=8, pos_emb_time=4, num_attention_heads=2,
                           num_hidden_layers=2, hidden_size=32, intermediate_size=64, merge_kernel_size=[2, 2]),
        projection_hidden_size=32,  # the projector's pre-norm runs over the vision width
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
        vision_start_token_id=begin,
        vision_end_token_id=end,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Kimi_K25ForConditionalGeneration(config).eval()
    size = {"max_height": 8, "max_width": 8}  # at most 8 patches a side
    processor = Kimi_K25Processor(
        image_processor=Kimi_K25ImageProcessor(size=size, patch_size=14, merge_size=2, max_patches=64),
        video_processor=Kimi_K25VideoProcessor(size=size, patch_size=14, merge_size=2, max_patches=64,
                                               temporal_patch_size=1, do_sample_frames=False),
        tokenizer=tokenizer,
        # Kimi's template: an image is a whole media block around one pad, a video one placeholder that the processor
        # expands into timestamped media blocks
        chat_template=chat_template("<|media_begin|>image<|media_content|><|media_pad|><|media_end|>",
                                    "<|kimi_k25_video_placeholder|>"),
    )
    return model, processor
