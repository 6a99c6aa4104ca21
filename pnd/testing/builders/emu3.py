"""Emu3: an image becomes discrete tokens of a VQ-VAE (codes mapped to vocabulary tokens, an end-of-line token after
each row), embedded by the language model's own embedding table; a Llama-style language model at `model.model.text_model`.

The processor writes per image `<|image start|>` + `H*W` (the code grid, as text) + `<|image token|>` + `<image>` x
H * (W + 1) + `<|extra_201|>` + `<|image end|>`, all of it the expansion (markers and size text included), and puts
the tokenizer's bos token before every prompt. A 32-pixel image is 4x4 codes of a VQ-VAE that downsamples 8x (the processor assumes 8), so
4 * 5 = 20 `<image>` tokens. The 16 VQ codes are special tokens `<|visual token000000|>` … of the tokenizer.
"""

from __future__ import annotations

import torch

_CODES = 16


def build(seed: int):
    from transformers import Emu3Config, Emu3ForConditionalGeneration, Emu3ImageProcessor, Emu3Processor

    from pnd.testing import chat_template, tiny_tokenizer

    from ._pil_images import taking_tensors

    named = {"image_token": "<image>", "boi_token": "<|image start|>", "eoi_token": "<|image end|>",
             "image_wrapper_token": "<|image token|>", "eof_token": "<|extra_201|>"}
    codes = [f"<|visual token{code:06d}|>" for code in range(_CODES)]
    tokenizer = tiny_tokenizer([*named.values(), "<|extra_200|>", "<|bos|>", *codes], named=named,
                               corpus=("4*4 image 4*4",))
    tokenizer.bos_token = "<|bos|>"
    config = Emu3Config(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         attention_dropout=0.0, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id),
        vq_config=dict(codebook_size=_CODES, embed_dim=4, latent_channels=4, base_channels=32,
                       channel_multiplier=[1, 1, 1, 1], num_res_blocks=1, attn_resolutions=[], hidden_size=32,
                       num_attention_heads=1, temporal_downsample_factor=4),
        vocabulary_map=tokenizer.get_vocab(),
    )
    torch.manual_seed(seed)
    model = Emu3ForConditionalGeneration(config).eval()
    processor = taking_tensors(Emu3Processor)(  # its image processor takes no tensors
        image_processor=Emu3ImageProcessor(min_pixels=32 * 32, max_pixels=32 * 32, spatial_factor=8),
        tokenizer=tokenizer,
        chat_template=chat_template("<image>"),
    )
    return model, processor
