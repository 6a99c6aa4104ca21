"""Llama 4: a tiny random-weight `Llama4ForConditionalGeneration` and its processor, built offline (images only: the
family has no video processor).

The language model keeps Llama 4's layer mix: chunked-attention RoPE layers (chunks of 16 tokens) around a NoPE
layer with full causal attention (attention-temperature tuning), and a mixture-of-experts layer (4 experts, top-1,
plus the shared expert) between dense ones; as in Maverick, MoE layers are interleaved and there is no q/k norm.
The processor resizes a 64-pixel image onto a 2x2 canvas of 32-pixel tiles plus a global 32-pixel view; each tile
is 4x4 patches of 8 pixels, pixel-shuffled 2x2 into 4 `<|patch|>` tokens, written as `<|image_start|>`, the tiles'
patches with `<|tile_x_separator|>` between tiles of a row and `<|tile_y_separator|>` after each row, `<|image|>`,
the global view's patches, `<|image_end|>`. The image processor skips the 0.5/0.5 normalization (pixels in
[0, 1]): with it, it returns bfloat16 pixels, which this float32 model cannot take.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import Llama4Config, Llama4ForConditionalGeneration, Llama4ImageProcessor, Llama4Processor

    from pnd.testing import chat_template, tiny_tokenizer

    specials = ["<|image_start|>", "<|image_end|>", "<|image|>", "<|patch|>", "<|tile_x_separator|>",
                "<|tile_y_separator|>"]
    tokenizer = tiny_tokenizer(specials)
    ids = dict(zip(specials, tokenizer.convert_tokens_to_ids(specials)))
    tile, patch = 32, 8
    config = Llama4Config(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=32, intermediate_size_mlp=128,
            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=1024, rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
            no_rope_layers=[1, 0, 1],  # 1: RoPE with chunked attention, 0: NoPE with full attention
            attention_chunk_size=16,
            num_local_experts=4, num_experts_per_tok=1, moe_layers=[1],
            # Maverick's attention (no q/k norm): Scout's parameter-free L2 q/k norm on the RoPE layers would undo
            # the q/k-projection scaling `pnd.testing` sharpens attention with
            use_qk_norm=False,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        ),
        vision_config=dict(
            hidden_size=32, intermediate_size=128,  # the MLP's width is also the pixel-shuffled width (4 x 32)
            num_hidden_layers=2, num_attention_heads=2, image_size=tile, patch_size=patch,
            vision_output_dim=64, projector_input_dim=64, projector_output_dim=64, pixel_shuffle_ratio=0.5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        boi_token_index=ids["<|image_start|>"],
        eoi_token_index=ids["<|image_end|>"],
        image_token_index=ids["<|patch|>"],  # the model's placeholder: each <|patch|> takes one image feature
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Llama4ForConditionalGeneration(config).eval()
    processor = Llama4Processor(
        # rescaled to [0, 1] without the 0.5/0.5 normalization: with it, the processor computes in bfloat16 (as the
        # original does) and returns bfloat16 pixels, which a float32 model cannot take
        image_processor=Llama4ImageProcessor(size={"height": tile, "width": tile}, max_patches=4, do_normalize=False),
        tokenizer=tokenizer,
        patch_size=patch,
        pixel_shuffle_ratio=0.5,
        chat_template=chat_template("<|image|>"),
    )
    return model, processor
