"""Gemma 3: a tiny SigLIP vision tower and a tiny Gemma 3 language model (bidirectional image blocks); images
only."""

from __future__ import annotations

import torch

from ..parts import TINY_CLIP, chat_template, tiny_tokenizer


def build(seed: int):
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessor, Gemma3Processor

    names = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    tokenizer = tiny_tokenizer(list(names.values()), named=names)
    tokenizer.add_tokens(["\n\n\n", "\n\n"])  # as Gemma's tokenizer: a run of newlines is one token
    config = Gemma3Config(
        vision_config={**TINY_CLIP, "model_type": "siglip_vision_model"},
        text_config=dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, head_dim=16,
                         num_attention_heads=4, num_key_value_heads=2, query_pre_attn_scalar=16,
                         max_position_embeddings=1024, num_hidden_layers=3, sliding_window=6,  # prompts: ~25 tokens
                         layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None),
        mm_tokens_per_image=4,
        boi_token_index=tokenizer.boi_token_id,
        eoi_token_index=tokenizer.convert_tokens_to_ids(names["eoi_token"]),
        image_token_index=tokenizer.image_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():  # initialised to zeros: the image would not reach the language model
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(0, 1)
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        image_seq_length=config.mm_tokens_per_image,
        chat_template=chat_template(names["boi_token"]),
    )
    return model, processor
