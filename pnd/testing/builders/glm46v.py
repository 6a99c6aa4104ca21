"""GLM-4.6V and Glmga (`model_type`): GLM-4.1V's vision tower and 3-D M-RoPE language model (glm4v_text), with the
GLM-4.6V processor (a video is written as frames `<|begin_of_image|>` image tokens `<|end_of_image|>` followed by a
"T.T seconds" timestamp). transformers maps Glmga to GLM-4.6V's model class and has no Glmga processor class: its own
image and video processors go into GLM-4.6V's processor."""

from __future__ import annotations

import torch

_SPECIALS = ["<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|image|>",
             "<|video|>"]


def glm_tokenizer():
    """The tiny tokenizer of the GLM-4.6V-format families (GLM-4.6V, GLM-5-next), its special tokens' config ids, and
    the chat template: an image is `<|begin_of_image|><|image|><|end_of_image|>`, a video the same around
    `<|video|>`."""
    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(_SPECIALS, corpus=("0.0 seconds 0.5 seconds 1.0 seconds 1.5 seconds",))
    ids = dict(zip(("image_start_token_id", "image_end_token_id", "video_start_token_id", "video_end_token_id",
                    "image_token_id", "video_token_id"), tokenizer.convert_tokens_to_ids(_SPECIALS)))
    template = chat_template("<|begin_of_image|><|image|><|end_of_image|>",
                             "<|begin_of_video|><|video|><|end_of_video|>")
    return tokenizer, ids, template


def build(seed: int, model_type: str = "glm46v"):
    import transformers
    from transformers import Glm46VForConditionalGeneration, Glm46VProcessor

    prefix = {"glm46v": "Glm46V", "glmga": "Glmga"}[model_type]
    config_class, image_processor, video_processor = (getattr(transformers, f"{prefix}{part}") for part in
                                                      ("Config", "ImageProcessor", "VideoProcessor"))
    tokenizer, ids, template = glm_tokenizer()
    config = config_class(
        text_config=dict(
            model_type="glm4v_text", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "partial_rotary_factor": 1.0,
                             "rope_theta": 10000.0},
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(model_type="glm4v_vision", depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                           patch_size=14, image_size=56, spatial_merge_size=2, temporal_patch_size=2,
                           out_hidden_size=64),
        **ids,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Glm46VForConditionalGeneration(config).eval()
    # pixel budgets count the temporal patch (2 frames for an image): a 64-px image becomes 56x56 (4 tokens), a 4-frame
    # 56-px video 2 frame groups of 4 tokens
    image_size = {"shortest_edge": 2 * 56 * 56, "longest_edge": 2 * 56 * 56}
    video_size = {"shortest_edge": 56 * 56, "longest_edge": 4 * 56 * 56}
    processor = Glm46VProcessor(
        image_processor=image_processor(size=image_size),
        video_processor=video_processor(size=video_size, do_sample_frames=False),
        tokenizer=tokenizer,
        chat_template=template,
    )
    return model, processor
