"""GLM-5.3-Flash (glm5_next): GLM-4.6V-style vision tower (axial 2-D RoPE, a strided-convolution merger) and a NoPE
language model with 4 hyper-connection streams: KDA linear attention (recurrent state and short convolution) around
MLA layers under DeepSeek-style sparse attention, a dense first MLP then MoE with a shared expert; 1-D positions,
which the language model does not use.

A 64-pixel image is resized to 56 pixels, 4x4 patches merged 2x2: `<|begin_of_image|>`, 4 image tokens,
`<|end_of_image|>`. A 4-frame 56-pixel video is 2 groups of 2 frames, each the same block of 4 image tokens followed by
a "T.T seconds" timestamp, all inside `<|begin_of_video|>` and `<|end_of_video|>` (images and videos share the image
token). The indexer scores pools of 4 keys and keeps 2 of them plus the query's incomplete pool (at most 11 keys), so
that on ~40-token prompts the indexed layers do drop keys; the second indexed layer reuses the first one's selection.
Beam search over a video crashes in transformers itself, as GLM-4.6V's: `_expand_multimodal_outputs` counts
`video_token_id`, which the processor replaces by image tokens.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Glm5NextConfig,
        Glm5NextForConditionalGeneration,
        Glm5NextImageProcessor,
        Glm5NextProcessor,
        Glm5NextVideoProcessor,
    )

    from pnd.testing.builders.glm46v import glm_tokenizer

    tokenizer, ids, template = glm_tokenizer()
    config = Glm5NextConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
            num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
            layer_types=["linear_attention", "indexed_attention", "indexed_attention", "linear_attention"],
            indexer_types=["full", "full", "shared", "full"],  # the 3rd layer reuses the 2nd's top-k
            mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
            n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
            q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=0, v_head_dim=16,  # NoPE MLA
            # 16 indexer heads: a pool scores 0 only if every head's ReLU does, so top-k seldom meets a tie (with 2
            # heads, ties broken by the number of pools made transformers' cached and uncached decoding differ)
            index_n_heads=16, index_head_dim=16, index_topk=8, index_kpool=4,
            linear_num_heads=2, linear_head_dim=16, hc_mult=4,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14, image_size=56,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                           projection_intermediate_size=64),
        **ids,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Glm5NextForConditionalGeneration(config).eval()
    # token budgets in units of 2 frames of 28x28 pixels: an image (one frame, doubled) fits 56x56, a 4-frame video too
    processor = Glm5NextProcessor(
        image_processor=Glm5NextImageProcessor(min_image_tokens=1, max_image_tokens=4),
        video_processor=Glm5NextVideoProcessor(min_image_tokens=1, max_image_tokens=8, do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=template,
    )
    return model, processor
