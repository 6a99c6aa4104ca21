"""MiniCPM-OCR: MiniCPM-V 4.6's vision side (SigLIP-like encoder, window-attention merger, MLP merger; "4x"
downsampling) with Qwen3.5's hybrid language model (Gated-DeltaNet layers around full attention); 1-D positions.

A 64-pixel image is an overview of one token plus 2x2 slices of one token each (28-pixel scale); each frame of a
4-frame 56-pixel video is four tokens, inside `<image>...</image>`, the video led by `<image_id>0</image_id>`.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import MiniCPMOcrConfig, MiniCPMOcrForConditionalGeneration, MiniCPMOcrImageProcessor
    from transformers import MiniCPMOcrProcessor, MiniCPMOcrVideoProcessor

    from pnd.testing import _CHAT_TEMPLATE, _HYBRID_LAYERS, tiny_tokenizer

    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "image_start_token": "<image>",
             "image_end_token": "</image>", "slice_start_token": "<slice>", "slice_end_token": "</slice>",
             "image_id_start_token": "<image_id>", "image_id_end_token": "</image_id>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True, "rope_theta": 10000.0,
            "partial_rotary_factor": 1.0}
    config = MiniCPMOcrConfig(
        text_config=dict(
            model_type="qwen3_5_text", vocab_size=len(tokenizer), hidden_size=64, head_dim=16, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=1024, rope_parameters=rope, num_hidden_layers=3,
            intermediate_size=128, layer_types=_HYBRID_LAYERS, linear_conv_kernel_dim=4, linear_key_head_dim=16,
            linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=56, patch_size=14),
        insert_layer_id=0,
        downsample_mode="4x",  # MiniCPM-OCR's default: one 2x2 merge, a 28-pixel slice is one token
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = MiniCPMOcrForConditionalGeneration(config).eval()
    common = dict(patch_size=14, downsample_mode="4x")
    processor = MiniCPMOcrProcessor(
        image_processor=MiniCPMOcrImageProcessor(scale_resolution=28, max_slice_nums=4, **common),
        video_processor=MiniCPMOcrVideoProcessor(scale_resolution=56, do_sample_frames=False, **common),
        tokenizer=tokenizer,
        chat_template=_CHAT_TEMPLATE.replace("{{ image_placeholder }}", "<|image_pad|>")
        .replace("{{ video_placeholder }}", "<|video_pad|>"),
    )
    return model, processor
