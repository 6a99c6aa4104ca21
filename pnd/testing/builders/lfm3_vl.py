"""LFM3-VL: a vision encoder of gated 2-D convolution and attention layers, and LFM3, a hybrid language model (short
convolutions on both sides of each full- or sliding-window attention layer); 1-D positions.

A 64-pixel image is 4x4 patches of 16, merged 2x2: 4 tokens. A 4-frame 56-pixel video is resized to 64 pixels and
merged in 2 groups of 2 frames, each `<t seconds>` and 4 tokens inside `<|vision_start|>...<|vision_end|>`.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Lfm3VlConfig, Lfm3VlForConditionalGeneration, Lfm3VlProcessor

    from pnd.testing import qwen3_vl_processor_parts, tiny_tokenizer

    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "vision_start_token": "<|vision_start|>",
             "vision_end_token": "<|vision_end|>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named, corpus=("<0.2 seconds> <1.2 seconds>",))
    config = Lfm3VlConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, patch_size=16, spatial_merge_size=2,
                           temporal_patch_size=2, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                           layer_types=["conv", "full_attention"], conv_kernel_size=3),
        text_config=dict(
            model_type="lfm3", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=5,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
            # LFM3's pattern (conv, conv, full, conv, sliding, conv, full, ...), shortened: a short-convolution layer on
            # both sides of each attention layer, a sliding layer before a full one (as in the checkpoints: a full layer
            # reads what the sliding window let each token see)
            layer_types=["conv", "sliding_attention", "conv", "full_attention", "conv"],
            sliding_window=6,  # prompts: ~25 tokens
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            tie_word_embeddings=False,
        ),
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
        vision_start_token_id=tokenizer.vision_start_token_id,
        vision_end_token_id=tokenizer.vision_end_token_id,
        projector_hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Lfm3VlForConditionalGeneration(config).eval()
    # Qwen3-VL's template and image/video processors, from which LFM3-VL's processor derives
    return model, Lfm3VlProcessor(tokenizer=tokenizer, **qwen3_vl_processor_parts())
