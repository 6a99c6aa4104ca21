"""Qwen2.5-Omni's thinker (the text-generating half of Qwen2.5-Omni): Qwen2.5-VL's windowed vision tower, a
Whisper-style audio tower and a Qwen2 language model with 3-D M-RoPE (time stride from `video_second_per_grid`).

The chat template writes `<|vision_bos|><|IMAGE|><|vision_eos|>` (`<|VIDEO|>` for a video), and the processor expands
the pad token alone: a 56-pixel image is 4x4 patches of 14 pixels, merged 2x2 (4 tokens); a 4-frame 56-pixel video is
2 temporal patches of 2 frames (8 tokens). Audio is supported by the model and processor (a tiny audio tower, a
Whisper feature extractor) but refused by pnd at alpha > 0 (`pnd/decoding/paired.py`). The config's
`audio_start_token_id` lies outside the tiny vocabulary: transformers' `get_rope_index` takes every `<|audio_bos|>` of
the sequence for an audio input, so a forward over generated text holding one (the brute-force reference's) crashes
with no audio features.
"""

from __future__ import annotations

import torch

_NAMED = {"image_token": "<|IMAGE|>", "video_token": "<|VIDEO|>", "audio_token": "<|AUDIO|>",
          "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>",
          "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"}


def build(seed: int):
    from transformers import (
        Qwen2_5OmniProcessor,
        Qwen2_5OmniThinkerConfig,
        Qwen2_5OmniThinkerForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(list(_NAMED.values()), named=_NAMED)
    ids = {key: tokenizer.convert_tokens_to_ids(token) for key, token in _NAMED.items()}
    config = Qwen2_5OmniThinkerConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, window_size=56,
                           fullatt_block_indexes=[1]),
        audio_config=dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
                          output_dim=64, max_source_positions=200, n_window=50),
        image_token_index=ids["image_token"],
        video_token_index=ids["video_token"],
        audio_token_index=ids["audio_token"],
        vision_start_token_id=ids["vision_bos_token"],  # read by get_rope_index, not a declared field
        vision_end_token_id=ids["vision_eos_token"],
        # out of the vocabulary: the random model generates `<|audio_bos|>` and `<|AUDIO|>`, and transformers'
        # get_rope_index counts every audio start of a from-scratch forward (the reference's) as an audio input
        audio_start_token_id=len(tokenizer) + 1,
        audio_end_token_id=ids["audio_eos_token"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Qwen2_5OmniThinkerForConditionalGeneration(config).eval()
    pixels = dict(min_pixels=56 * 56, max_pixels=56 * 56, patch_size=14, merge_size=2, temporal_patch_size=2)
    processor = Qwen2_5OmniProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels),
        video_processor=Qwen2VLVideoProcessor(**pixels, do_sample_frames=False, cap_pixels_per_frame=True),
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tokenizer,
        chat_template=chat_template("<|vision_bos|><|IMAGE|><|vision_eos|>", "<|vision_bos|><|VIDEO|><|vision_eos|>"),
    )
    processor.videos_kwargs = {"size": dict(processor.video_processor.size)}
    return model, processor
