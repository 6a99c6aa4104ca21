"""PaliGemma: a SigLIP vision tower, a linear projector and a Gemma language model run as a prefix LM.

The processor writes `<image>` x image_seq_length where the template wrote `<image>`, then the BOS token after the last
image and a newline at the end; `token_type_ids` is 0 on the whole prompt (the bidirectional prefix) and 1 on a
suffix (training only). A 32-pixel image of 8-pixel patches: 16 image tokens. No video processor.
"""

from __future__ import annotations

import torch


def build(seed: int, **text):
    """`text` overrides the Gemma text config; PaliGemma 2: text_model_type="gemma2" (sliding-window layers)."""
    from transformers import (
        PaliGemmaConfig,
        PaliGemmaForConditionalGeneration,
        PaliGemmaProcessor,
        SiglipImageProcessor,
    )

    from ..parts import TINY_CLIP, chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>", "<bos>"], named={"image_token": "<image>"})
    tokenizer.bos_token = "<bos>"
    config = PaliGemmaConfig(
        vision_config={**TINY_CLIP, "model_type": "siglip_vision_model", "vision_use_head": False},
        text_config=dict(model_type=text.pop("text_model_type", "gemma"), vocab_size=len(tokenizer), hidden_size=64,
                         intermediate_size=128, head_dim=16, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
                         max_position_embeddings=1024, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, **text),
        image_token_index=tokenizer.image_token_id,
        vocab_size=len(tokenizer),
        projection_dim=64,
        hidden_size=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = PaliGemmaForConditionalGeneration(config).eval()
    image_processor = SiglipImageProcessor(size={"height": 32, "width": 32})
    image_processor.image_seq_length = config.text_config.num_image_tokens
    processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                   chat_template=chat_template("<image>"))
    return model, processor
