"""DeepSeek-OCR 2: a tiny random-weight `DeepseekOcr2ForConditionalGeneration` and its processor, built offline
(images only).

A SAM tower reads each view; its features and a fixed set of learned queries (144 for a view of at most 144 SAM
features, else 256) go through a small Qwen2-style encoder, whose query outputs are projected to the DeepSeek
language model (a dense and a mixture-of-experts layer here), followed by a learned view separator. The processor
writes one `<image>` per query of each view and one for the separator, and nothing else: it counts a view's queries
from its side (`ceil(size / patch_size / downsample_ratio)` squared), so a tiny model still needs 768-pixel views to
get 144 queries. SAM reads them in 64-pixel patches here (12x12, 3x3 after its neck), where the real tower reads
16-pixel ones, initialised as the encoder is (its default, 1e-10, would make every image the same); the local tiles
are off (`crop_to_patches=False`): one 768-pixel view, 145 `<image>` tokens.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        DeepseekOcr2Config,
        DeepseekOcr2ForConditionalGeneration,
        DeepseekOcr2ImageProcessor,
        DeepseekOcr2Processor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>"], named={"image_token": "<image>"})
    text = {**tiny_llama_text(tokenizer), "model_type": "deepseek_ocr2_text", "mlp_layer_types": ["dense", "sparse"],
            "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "moe_intermediate_size": 32}
    text.pop("num_key_value_heads")
    config = DeepseekOcr2Config(
        vision_config=dict(
            sam_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                            image_size=768, patch_size=64, window_size=4, global_attn_indexes=[1], mlp_dim=64,
                            initializer_range=0.02,
                            downsample_channels=[32, 32]),
            encoder_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                num_key_value_heads=2, vocab_size=16)),
        text_config=text,
        image_token_id=tokenizer.image_token_id,
    )
    torch.manual_seed(seed)
    model = DeepseekOcr2ForConditionalGeneration(config).eval()
    processor = DeepseekOcr2Processor(
        image_processor=DeepseekOcr2ImageProcessor(size={"height": 768, "width": 768}, tile_size=768,
                                                   crop_to_patches=False),
        tokenizer=tokenizer,
        chat_template=chat_template("<image>"),
    )
    return model, processor
