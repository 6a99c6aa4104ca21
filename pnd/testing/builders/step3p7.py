"""Step-3.7-Flash: a ViT with two stride-2 conv downsamplers and a Step MoE language model (sliding-window and full
attention layers, per-head sigmoid output gates, zero-centred RMSNorms, dense then MoE MLPs with a shared expert).

The chat template writes `<im_patch>` per image; the processor expands it into the local crops, each
`<patch_start>` + 4 `<im_patch>` + `<patch_end>` (a `<patch_newline>` after each crop row but the last), then the
global view `<im_start>` + 4 `<im_patch>` + `<im_end>`. A 64-pixel image is 2x2 crops of 32 pixels plus the 32-pixel
global view (ViT patches of 4 pixels, 8x8 per view, downsampled 4x): 20 placeholders in 31 tokens.
"""

from __future__ import annotations

import torch

_SPECIALS = ["<im_patch>", "<im_start>", "<im_end>", "<patch_start>", "<patch_end>", "<patch_newline>"]


def build(seed: int):
    from transformers import Step3p7Config, Step3p7ForConditionalGeneration, Step3p7ImageProcessor, Step3p7Processor

    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(_SPECIALS)
    config = Step3p7Config(
        vision_config=dict(hidden_size=32, mlp_ratio=2.0, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                           patch_size=4),
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=3, head_dim=16,
            num_attention_heads=4, num_key_value_heads=2, num_sliding_attention_heads=4, max_position_embeddings=1024,
            # the real mix: sliding-window layers around full attention, dense MLPs first then MoE ones
            layer_types=["sliding_attention", "full_attention", "sliding_attention"], sliding_window=8,
            mlp_layer_types=["dense", "sparse", "sparse"], n_routed_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, share_expert_dim=32,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        image_token_id=tokenizer.convert_tokens_to_ids("<im_patch>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Step3p7ForConditionalGeneration(config).eval()
    image_processor = Step3p7ImageProcessor(size={"height": 32, "width": 32}, patch_size=32, max_image_size=128)
    image_processor.vision_patch_size = 4  # not a constructor argument; the processor reads it for the token counts
    processor = Step3p7Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=chat_template("<im_patch>"),  # Step's template: "<im_patch>"
    )
    return model, processor
