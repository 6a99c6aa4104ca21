"""Qwen4-Exp: a Qwen3-VL-like vision tower (axial RoPE, no deepstack) and a hybrid MoE language model: Gated-DeltaNet
"linear_attention" layers around "indexed_attention" layers, whose QSA indexer lets each query attend only to the top-k
blocks of mean-pooled keys within a token budget (plus the last, incomplete block); a residual stream `hc_count` wide
(hyper-connections); per-layer embeddings on some linear layers (PLE: hashed 2/3-gram embeddings of the token ids and a
dilated short convolution, cached as conv states 2 and 1 of their layer); interleaved M-RoPE, 4 rows of position ids
in generation (text, then t/h/w). No processor class of its own: AutoProcessor maps it to Qwen3-VL's.

A 64-pixel image is `<|vision_start|>`, 4 `<|image_pad|>`, `<|vision_end|>`. A 4-frame 56-pixel video (frames resized to
64 pixels) is two frame pairs, each a timestamp (`<0.0 seconds>`, `<0.1 seconds>` at the default 24 fps: 6 tokens),
`<|vision_start|>`, 4 `<|video_pad|>` and `<|vision_end|>` (24 tokens, inside the template's own start/end). The
indexer keeps 2 blocks of 4 keys (a budget of 8), well under the prompts' 24 (image) to 47 (video) tokens.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Qwen3VLProcessor, Qwen4ExpConfig, Qwen4ExpForConditionalGeneration

    from pnd.testing import QWEN_VISION_TOKENS, qwen3_vl_processor_parts, tiny_tokenizer, vision_token_ids

    tokenizer = tiny_tokenizer(list(QWEN_VISION_TOKENS), corpus=("<0.5 seconds> <1.5 seconds>",))
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True, "rope_theta": 10000.0,
            "partial_rotary_factor": 1.0}  # rotary on the whole head, as in the tiny Qwen3.5
    config = Qwen4ExpConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
            layer_types=["linear_attention", "indexed_attention", "linear_attention"], num_hidden_layers=3,
            max_position_embeddings=1024, rope_parameters=rope,
            linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
            linear_num_value_heads=4,
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
            hc_count=2, hc_lowrank=16,
            ple_layer_ids=[1, 3], ple_embed_dim=32, heads_per_ngram=2,  # 1-indexed; hashed tables of ~1000 rows a head
            ngram_vocab_size_base=1000,
            indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=16),
        **vision_token_ids(tokenizer),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Qwen4ExpForConditionalGeneration(config).eval()
    # PLE's short convolution starts at zero: give it small weights, so that its cached state matters without drowning
    # the video (its input is normalized: at 0.1 the tokens no longer depend on the video)
    with torch.no_grad():
        for layer in model.model.language_model.layers:
            if layer.ple is not None:
                layer.ple.conv1d.weight.normal_(0.0, 0.01)
    return model, Qwen3VLProcessor(tokenizer=tokenizer, **qwen3_vl_processor_parts())
