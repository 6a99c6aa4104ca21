"""Qwen3-Omni's thinker (the text-generating half of Qwen3-Omni-MoE): Qwen3-VL's vision tower (with deepstack), a
Whisper-style audio tower and a Qwen3 MoE language model (every layer MoE) with interleaved 3-D M-RoPE.

The chat template writes `<|vision_start|><|image_pad|><|vision_end|>` (`<|video_pad|>` for a video), and the
processor expands the pad token alone: a 64-pixel image is 4x4 patches of 16 pixels, merged 2x2 (4 tokens); a
4-frame 56-pixel video is resized to 64 pixels, 2 temporal patches of 2 frames (8 tokens). Audio is supported by the
model and processor (a tiny audio tower, a Whisper feature extractor) but not exercised by pnd.
"""

from __future__ import annotations

import torch

_NAMED = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "audio_token": "<|audio_pad|>",
          "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>",
          "audio_bos_token": "<|audio_start|>", "audio_eos_token": "<|audio_end|>"}


def build(seed: int):
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        Qwen3OmniMoeProcessor,
        Qwen3OmniMoeThinkerConfig,
        Qwen3OmniMoeThinkerForConditionalGeneration,
        WhisperFeatureExtractor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(list(_NAMED.values()), named=_NAMED)
    ids = {key: tokenizer.convert_tokens_to_ids(token) for key, token in _NAMED.items()}
    config = Qwen3OmniMoeThinkerConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[],
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True,
                             "interleaved": True, "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=16,
                           deepstack_visual_indexes=[0]),
        audio_config=dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
                          output_dim=64, downsample_hidden_size=8, max_source_positions=200),
        image_token_id=ids["image_token"],
        video_token_id=ids["video_token"],
        audio_token_id=ids["audio_token"],
        vision_start_token_id=ids["vision_bos_token"],  # read by get_rope_index, not a declared field
        vision_end_token_id=ids["vision_eos_token"],
        audio_start_token_id=ids["audio_bos_token"],
        audio_end_token_id=ids["audio_eos_token"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Qwen3OmniMoeThinkerForConditionalGeneration(config).eval()
    pixels = dict(min_pixels=64 * 64, max_pixels=64 * 64, patch_size=16, merge_size=2, temporal_patch_size=2)
    processor = Qwen3OmniMoeProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels),
        video_processor=Qwen2VLVideoProcessor(**pixels, do_sample_frames=False, cap_pixels_per_frame=True),
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tokenizer,
        chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>",
                                    "<|vision_start|><|video_pad|><|vision_end|>"),
    )
    # the processor's class defaults ask videos for at least 128 merged tokens a frame: keep the video processor's size
    processor.videos_kwargs = {"size": dict(processor.video_processor.size)}
    return model, processor
