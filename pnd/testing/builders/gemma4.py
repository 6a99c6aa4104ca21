"""Gemma 4: a tiny random-weight `Gemma4ForConditionalGeneration` and its processor, built offline.

The language model keeps Gemma 4's layer mix: sliding-window layers (default RoPE) and a last full-attention layer
(proportional RoPE on a quarter of the head), q/k/v RMSNorms, a dense MLP plus a small mixture of experts in every
layer (the 26B-A4B layout), per-layer input embeddings (the E2B/E4B layout) and bidirectional attention inside each
image or video frame block on the sliding layers (`use_bidirectional_attention="vision"`, driven by
`mm_token_type_ids`). A 64-pixel image is resized by the processor to 16x16 patches of 14 pixels, pooled 2x2: 64
soft tokens; video frames are not resized (56 pixels: 4x4 patches, pooled 2x2: 4 soft tokens per frame), each
frame written as `MM:SS <|image>` + `<|video|>` x 4 + `<image|>`.

`build(seed, unified=True)` builds Gemma 4 unified (`gemma4_unified.py`): no vision tower, 14-pixel patches merged 2x2
into 28-pixel model patches that an embedder maps straight into the language model (bidirectional vision blocks on
every layer, no MoE, no per-layer embeddings).
"""

from __future__ import annotations

import torch
import transformers


def build(seed: int, unified: bool = False):
    from pnd.testing import chat_template, tiny_tokenizer

    family = "Gemma4Unified" if unified else "Gemma4"
    part = lambda name: getattr(transformers, family + name)  # noqa: E731
    named = {"image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
             "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"}
    # "<|video|>" is added by the processor itself; trained in here so that the vocabulary is known up front
    tokenizer = tiny_tokenizer([*named.values(), "<|video|>"], named=named)
    ids = dict(zip(named, tokenizer.convert_tokens_to_ids(list(named.values()))))
    patch, pool = 14, 2
    if unified:  # the embedder's width is the language model's, as in the real checkpoints
        vision, text = dict(mm_embed_dim=64, output_proj_dims=64, mm_posemb_size=16), {}
    else:  # a vision tower; a dense MLP plus a small mixture of experts, per-layer input embeddings
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, head_dim=16, position_embedding_size=64)
        text = dict(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=32,
                    vocab_size_per_layer_input=len(tokenizer), hidden_size_per_layer_input=8)
    config = part("Config")(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=16,
            max_position_embeddings=1024, sliding_window=6,  # prompts: ~25 text tokens
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            use_bidirectional_attention="vision", **text,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
            tie_word_embeddings=False,
        ),
        vision_config=dict(patch_size=patch, pooling_kernel_size=pool, **vision),
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
    model = part("ForConditionalGeneration")(config).eval()
    sizes = dict(patch_size=patch, pooling_kernel_size=pool, max_soft_tokens=70)
    processor = part("Processor")(
        feature_extractor=part("AudioFeatureExtractor")(),
        image_processor=part("ImageProcessor")(**sizes),
        # frames kept at their size: the processor would otherwise upscale each to the 70-token budget
        video_processor=part("VideoProcessor")(**sizes, do_resize=False, do_sample_frames=False),
        tokenizer=tokenizer,
        image_seq_length=70,
        chat_template=chat_template(named["image_token"], "<|video|>"),
    )
    return model, processor
