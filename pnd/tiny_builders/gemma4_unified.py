"""Gemma 4 unified (encoder-free): a tiny random-weight `Gemma4UnifiedForConditionalGeneration` and its processor,
built offline.

There is no vision tower: the processor cuts 14-pixel patches and merges them 2x2 into 28-pixel model patches, which
the model embeds (LayerNorm, Dense, LayerNorm, factorized 2-D position embedding, LayerNorm, RMSNorm, Linear) straight
into the language model, one soft token per model patch. The language model keeps Gemma 4's layer mix: sliding-window
layers (default RoPE) and a last full-attention layer (proportional RoPE on a quarter of the head), q/k/v RMSNorms,
and bidirectional attention inside each image or video frame block (`use_bidirectional_attention="vision"`, driven by
`mm_token_type_ids`). A 64-pixel image is resized by the processor to 8x8 model patches: 64 soft tokens; video
frames are not resized (56 pixels: 2x2 model patches, 4 soft tokens per frame), each frame written as
`MM:SS <|image>` + `<|video|>` x 4 + `<image|>`.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Gemma4UnifiedAudioFeatureExtractor,
        Gemma4UnifiedConfig,
        Gemma4UnifiedForConditionalGeneration,
        Gemma4UnifiedImageProcessor,
        Gemma4UnifiedProcessor,
        Gemma4UnifiedVideoProcessor,
    )

    from pnd.testing import _CHAT_TEMPLATE, tiny_tokenizer

    named = {"image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
             "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"}
    # "<|video|>" is added by the processor itself; trained in here so that the vocabulary is known up front
    tokenizer = tiny_tokenizer([*named.values(), "<|video|>"], named=named)
    ids = dict(zip(named, tokenizer.convert_tokens_to_ids(list(named.values()))))
    patch, merge = 14, 2
    config = Gemma4UnifiedConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=16,
            max_position_embeddings=1024, sliding_window=6,  # prompts: ~25 text tokens
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            use_bidirectional_attention="vision",
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            tie_word_embeddings=False,
        ),
        # the embedder's width is the language model's, as in the real checkpoints
        vision_config=dict(patch_size=patch, pooling_kernel_size=merge, mm_embed_dim=64, output_proj_dims=64,
                           mm_posemb_size=16),
        audio_config=None,
        image_token_id=ids["image_token"],
        video_token_id=tokenizer.convert_tokens_to_ids("<|video|>"),
        boi_token_id=ids["boi_token"],
        eoi_token_id=ids["eoi_token"],
        audio_token_id=ids["audio_token"],
        boa_token_id=ids["boa_token"],
        eoa_token_index=ids["eoa_token"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Gemma4UnifiedForConditionalGeneration(config).eval()
    vision = dict(patch_size=patch, pooling_kernel_size=merge, max_soft_tokens=70)
    processor = Gemma4UnifiedProcessor(
        feature_extractor=Gemma4UnifiedAudioFeatureExtractor(),
        image_processor=Gemma4UnifiedImageProcessor(**vision),
        # frames kept at their size: the processor would otherwise upscale each to the 70-token budget
        video_processor=Gemma4UnifiedVideoProcessor(**vision, do_resize=False, do_sample_frames=False),
        tokenizer=tokenizer,
        image_seq_length=70,
        chat_template=_CHAT_TEMPLATE.replace("{{ image_placeholder }}", named["image_token"])
        .replace("{{ video_placeholder }}", "<|video|>"),
    )
    return model, processor
