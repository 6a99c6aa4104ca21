"""Granite 4 Vision: a tiny random-weight `Granite4VisionForConditionalGeneration` and its processor, built offline
(images only: the family has no video processor).

The image is read LLaVA-NeXT style (a 32-pixel base view plus the 32-pixel tiles of its best grid pinpoint, one
`image_newline` feature after each row of the tiled part) by a SigLIP tower, and reaches the language model only by
"deepstack" injection: the `<image>` placeholders are embedded as zeros, then the features of the last vision layer
(window Q-Former projector, 4x4 patches to 2x2 per tile) are added to them before decoder layer 0, and four
spatially sampled groups (one corner of each 2x2 patch block each) before layers 1-4. The language model therefore
has 5 layers (one per injection target). Of Granite's multipliers, attention (1/head_dim) and logits (logits are
divided by 2, in the model's forward only, not in `lm_head`) are set as in the real checkpoints; the embedding and
residual multipliers stay 1 (the real 12 and 0.22 leave a random model's output a function of the last token only).
A 64-pixel image expands to 24 `<image>` tokens (4 for the base view,
4x4 for the 2x2 tiles, 4 newlines), with nothing else around them.

The Q-Former projector takes `vision_config.hidden_size // 64` heads, hence a vision width of 64.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        Granite4VisionConfig,
        Granite4VisionForConditionalGeneration,
        Granite4VisionProcessor,
        LlavaNextImageProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>"], named={"image_token": "<image>"})
    tile, patch = 32, 8
    pinpoints = [[32, 32], [32, 64], [64, 32], [64, 64]]
    config = Granite4VisionConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=tile, patch_size=patch),
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=5,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            attention_multiplier=1 / 16, logits_scaling=2.0,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        # the one-layer Q-Former of the family (a dict replaces the default fields); width, heads: the vision tower
        qformer_config=dict(num_hidden_layers=1, intermediate_size=64, cross_attention_frequency=1,
                            use_qformer_text_input=False),
        image_token_index=tokenizer.image_token_id,
        vision_feature_select_strategy="full",  # SigLIP: no CLS token
        vision_feature_layer=-1,
        image_grid_pinpoints=pinpoints,
        downsample_rate="2/4",  # 2x2 queries per 4x4 window: a 32-pixel tile's 4x4 patches to 2x2 tokens
        deepstack_layer_map=[[-1, 0]],
        spatial_vision_layer=-1,
        spatial_target_layers=[1, 2, 3, 4],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Granite4VisionForConditionalGeneration(config).eval()
    processor = Granite4VisionProcessor(
        image_processor=LlavaNextImageProcessor(size={"height": tile, "width": tile},
                                                crop_size={"height": tile, "width": tile},
                                                image_grid_pinpoints=pinpoints),
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=0,
        downsample_rate="2/4",
        chat_template=chat_template("<image>"),
    )
    return model, processor
