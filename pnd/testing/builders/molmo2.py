"""Molmo2: a tiny model and its processor (image views, video timestamps).

The adapter (attention pooling, then a SwiGLU projector) is drawn at unit gain: at the 0.02 init its output is ~1e-8,
so another image changed the logits by 5e-7 only.
"""

from __future__ import annotations

import torch

from ..parts import chat_template, tiny_tokenizer


def build(seed: int):
    from transformers import (
        Molmo2Config,
        Molmo2ForConditionalGeneration,
        Molmo2ImageProcessor,
        Molmo2Processor,
        Molmo2VideoProcessor,
    )

    specials = ["<|image|>", "<|video|>", "<im_patch>", "<im_col>", "<im_start>", "<low_res_im_start>", "<frame_start>",
                "<im_end>", "<frame_end>", "<im_low>"]
    tokenizer = tiny_tokenizer(specials, named={"image_token": "<|image|>", "video_token": "<|video|>"})
    ids = dict(zip(specials, tokenizer.convert_tokens_to_ids(specials)))
    attention = dict(num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64)
    config = Molmo2Config(
        vision_config=dict(hidden_size=32, num_hidden_layers=2, image_size=[56, 56], patch_size=14,
                           num_position_embeddings=16, **attention),
        adapter_config=dict(vision_feature_layer=[-1], hidden_size=32, text_hidden_size=64, **attention),
        text_config=dict(vocab_size=len(tokenizer), additional_vocab_size=0, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=1024, rope_scaling_layers=[], eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None),
        image_start_token_id=ids["<im_start>"], low_res_image_start_token_id=ids["<low_res_im_start>"],
        image_end_token_id=ids["<im_end>"], image_patch_id=ids["<im_patch>"],
        frame_start_token_id=ids["<frame_start>"], frame_end_token_id=ids["<frame_end>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Molmo2ForConditionalGeneration(config).eval()
    with torch.no_grad():  # else the image barely reaches the text (see the module's docstring)
        for module in model.model.multi_modal_projector.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(std=module.in_features ** -0.5)
    size = {"height": 56, "width": 56}  # one 4x4-patch crop per view, pooled 2x2: 4 tokens per view
    processor = Molmo2Processor(
        image_processor=Molmo2ImageProcessor(size=size, max_crops=1, overlap_margins=[1, 1], pooling_size=[2, 2]),
        video_processor=Molmo2VideoProcessor(size=size, pooling_size=[2, 2], do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=chat_template("<|image|>", "<|video|>"),
    )
    return model, processor
