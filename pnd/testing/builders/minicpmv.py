"""MiniCPM-V 4.6 and 4.7 and MiniCPM-OCR (`model_type`): a tiny model on Qwen3.5's hybrid language model and its
processor. MiniCPM-OCR is MiniCPM-V 4.6's vision side with Qwen3.5's hybrid language model (Gated-DeltaNet layers
around full attention) and 1-D positions: the same tiny model under its own classes."""

from __future__ import annotations

import torch

from ..parts import HYBRID_LAYERS, chat_template, tiny_tokenizer


def build(seed: int, model_type: str = "minicpmv4_6"):
    """MiniCPM-V 4.6 or 4.7 (canvas M-RoPE), or MiniCPM-OCR (1-D positions), with Qwen3.5's hybrid language model;
    images of 56 pixels cut into 2x2 slices (28-pixel scale)."""
    import transformers
    from transformers import AutoConfig, AutoModelForImageTextToText

    family = "MiniCPMOcr" if model_type == "minicpm_ocr" else "MiniCPMV4_6"
    processor_name = "MiniCPMV4_7Processor" if model_type == "minicpmv4_7" else f"{family}Processor"

    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "image_start_token": "<image>",
             "image_end_token": "</image>", "slice_start_token": "<slice>", "slice_end_token": "</slice>",
             "image_id_start_token": "<image_id>", "image_id_end_token": "</image_id>"}
    tokenizer = tiny_tokenizer(list(named.values()), named=named)
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True, "rope_theta": 10000.0,
            "partial_rotary_factor": 1.0}
    markers = {}
    if model_type == "minicpmv4_7":  # canvas M-RoPE pins these tokens to the image's corners
        [newline] = tokenizer("\n", add_special_tokens=False).input_ids
        markers = dict(zip(("image_start_id", "image_end_id", "slice_start_id", "slice_end_id"),
                           tokenizer.convert_tokens_to_ids(["<image>", "</image>", "<slice>", "</slice>"])),
                       newline_id=newline)
    config = AutoConfig.for_model(
        model_type,
        **markers,
        text_config=dict(
            model_type="qwen3_5_text", vocab_size=len(tokenizer), hidden_size=64, head_dim=16, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=1024, rope_parameters=rope, num_hidden_layers=3,
            intermediate_size=128, layer_types=HYBRID_LAYERS, linear_conv_kernel_dim=4, linear_key_head_dim=16,
            linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=56, patch_size=14),
        insert_layer_id=0,
        downsample_mode="4x",  # one 2x2 merge: a 28-pixel slice is one token, a 56-pixel frame four
        image_token_id=tokenizer.image_token_id,
        video_token_id=tokenizer.video_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    common = dict(patch_size=14, downsample_mode="4x")
    processor = getattr(transformers, processor_name)(
        image_processor=getattr(transformers, f"{family}ImageProcessor")(scale_resolution=28, max_slice_nums=4,
                                                                          **common),
        video_processor=getattr(transformers, f"{family}VideoProcessor")(scale_resolution=56, do_sample_frames=False,
                                                                          **common),
        tokenizer=tokenizer,
        chat_template=chat_template("<|image_pad|>", "<|video_pad|>"),
    )
    return model, processor
