"""Unlimited-OCR (unlimited_ocr): DeepSeek-OCR 2's vision (a SAM encoder whose features a CLIP encoder reads) and a
DeepSeek-V2-style MoE language model whose every layer is reference sliding-window attention (R-SWA): each token sees
the whole prompt and the last `sliding_window` generated tokens, its cache keeping the prompt apart from the window.

A 128-pixel image, not cropped into tiles, is 2x2 queries: `<image>` x (2 * 3 + 1) = 7 placeholders, nothing else
written. The window is 3 generated tokens, so that the tests' 6 steps slide it: there transformers' mask for R-SWA
misplaces masked prompt slots, which pnd repairs in its paired steps (`pnd/architectures/unlimited_ocr.py`;
tests/test_unlimited_ocr.py and tests/test_layer_kinds.py show the bug and the repair).

The SAM encoder is drawn at 0.02: at its config's `initializer_range` (1e-10) another image left the logits unchanged.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        UnlimitedOcrConfig,
        UnlimitedOcrForConditionalGeneration,
        UnlimitedOcrImageProcessor,
        UnlimitedOcrProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>"])
    config = UnlimitedOcrConfig(
        vision_config=dict(
            sam_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                            image_size=128, patch_size=16, mlp_dim=64, global_attn_indexes=[1], window_size=2,
                            downsample_channels=[32, 64], initializer_range=0.02),
            encoder_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                                image_size=128, patch_size=16)),
        text_config=dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
                         num_experts_per_tok=2, n_shared_experts=1, sliding_window=3, max_position_embeddings=1024,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = UnlimitedOcrForConditionalGeneration(config).eval()
    processor = UnlimitedOcrProcessor(
        image_processor=UnlimitedOcrImageProcessor(size={"height": 128, "width": 128}, tile_size=128,
                                                   crop_to_patches=False),
        tokenizer=tokenizer, chat_template=chat_template("<image>"), patch_size=16, downsample_ratio=4)
    return model, processor
