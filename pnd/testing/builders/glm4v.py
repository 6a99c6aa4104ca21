"""GLM-4.1V and GLM-4.5V (`model_type`): a tiny model and its processor."""

from __future__ import annotations

import torch

from ..parts import chat_template, tiny_tokenizer


def build(seed: int, model_type: str = "glm4v"):
    from transformers import (
        AutoConfig,
        AutoModelForImageTextToText,
        Glm4vImageProcessor,
        Glm4vProcessor,
        Glm4vVideoProcessor,
    )

    specials = ["<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|image|>",
                "<|video|>"]
    tokenizer = tiny_tokenizer(specials)
    ids = dict(zip(("image_start_token_id", "image_end_token_id", "video_start_token_id", "video_end_token_id",
                    "image_token_id", "video_token_id"), tokenizer.convert_tokens_to_ids(specials)))
    moe = dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
               first_k_dense_replace=1, n_group=1, topk_group=1) if model_type == "glm4v_moe" else {}
    config = AutoConfig.for_model(
        model_type,
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, **moe,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "partial_rotary_factor": 1.0,
                             "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14, image_size=56,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64),
        **ids,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config).eval()
    size = {"shortest_edge": 56 * 56, "longest_edge": 56 * 56 * 4}
    processor = Glm4vProcessor(
        image_processor=Glm4vImageProcessor(size={"shortest_edge": 56 * 56, "longest_edge": 56 * 56}),
        video_processor=Glm4vVideoProcessor(size=size, do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=chat_template("<|begin_of_image|><|image|><|end_of_image|>",
                                    "<|begin_of_video|><|video|><|end_of_video|>"),
    )
    return model, processor
