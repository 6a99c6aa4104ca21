"""DeepSeek-VL hybrid: a tiny random-weight `DeepseekVLHybridForConditionalGeneration` and its processor, built offline
(images only).

Two towers read each image: SigLIP at 32 pixels (4x4 patches of 8) and SAM at 64 pixels (8x8 patches of 8, windowed
attention with one global layer, its neck plus the global layer's features weighted by `high_res_vision_alpha`),
brought to the same 4x4 grid; the aligner joins them for the Llama language model. The processor writes
`num_image_tokens` `<image_placeholder>` tokens (16 here, the real 576) and nothing else. `high_res_vision_alpha` is
zero-initialised by transformers and set to 1 here, so that the high-resolution tower reaches the language model.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        DeepseekVLHybridConfig,
        DeepseekVLHybridForConditionalGeneration,
        DeepseekVLHybridImageProcessor,
        DeepseekVLHybridProcessor,
    )

    from pnd.testing import chat_template, tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image_placeholder>"], named={"image_token": "<image_placeholder>"})
    config = DeepseekVLHybridConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8),
        high_res_vision_config=dict(model_type="sam_vision_model", hidden_size=32, output_channels=16,
                                    num_hidden_layers=2, num_attention_heads=2, image_size=64, patch_size=8,
                                    window_size=4, global_attn_indexes=[1], mlp_dim=64),
        text_config=tiny_llama_text(tokenizer),
        image_token_id=tokenizer.image_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = DeepseekVLHybridForConditionalGeneration(config).eval()
    with torch.no_grad():
        model.model.high_res_vision_alpha.fill_(1.0)
    processor = DeepseekVLHybridProcessor(
        image_processor=DeepseekVLHybridImageProcessor(size={"height": 32, "width": 32},
                                                       high_res_size={"height": 64, "width": 64}),
        tokenizer=tokenizer,
        num_image_tokens=16,
        chat_template=chat_template("<image_placeholder>"),
    )
    return model, processor
