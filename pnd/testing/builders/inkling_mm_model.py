"""Inkling (inkling_mm_model): a ViT with one token per 14-pixel cell (the image processor cuts the image into cells,
one column more than fit, padded with -1), an audio embedding of quantized mel bins, and a mixture-of-experts language
model of hybrid layers, each an attention with a relative position bias and short convolutions on its keys and values,
plus short convolutions after the attention and after the MLP; sliding-window layers (`hybrid_sliding`) alternate with
full ones (`hybrid`). No rotary embedding: the bias by distance is the text's only sense of order (its full layers'
query log-scaling, `log_scaling_n_floor`, is off, as transformers' default).

A 56-pixel image is 4 x 5 = 20 `<|image|>` placeholders (nothing else written: the template writes
`<|content_image|>` before them, as the family's does). The window (8) and the bias's extent (8) are shorter than the
prompts; the bias's profiles are sharpened. The output head has 8 rows past the vocabulary, cut by the forward
(`unpadded_vocab_size`), and the forward divides the last hidden states by `logits_mup_width_multiplier` (2 here).
The text weights start at 0.1 (`initializer_range`): at transformers' 0.02 the layers barely move the residual stream
of normalized embeddings, and the image would not change the tokens.
"""

from __future__ import annotations

import torch


def build(seed: int):
    from transformers import (
        InklingConfig,
        InklingFeatureExtractor,
        InklingForConditionalGeneration,
        InklingImageProcessor,
        InklingProcessor,
    )

    from pnd.testing import chat_template, tiny_tokenizer

    from .inkling2 import hybrid_text_config, sharpen_relative_bias

    specials = ["<|image|>", "<|audio|>", "<|content_image|>", "<|content_audio_input|>"]
    tokenizer = tiny_tokenizer(specials)
    ids = dict(zip(specials, tokenizer.convert_tokens_to_ids(specials)))
    config = InklingConfig(
        text_config=hybrid_text_config(tokenizer, intermediate_size=64, n_shared_experts=1,
                                       logits_mup_width_multiplier=2.0, initializer_range=0.1),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, patch_size=14,
                           text_hidden_size=64),
        audio_config=dict(n_mel_bins=8, mel_vocab_size=16, text_hidden_size=64),
        image_token_id=ids["<|image|>"], audio_token_id=ids["<|audio|>"],
        image_bos_token_id=ids["<|content_image|>"], audio_bos_token_id=ids["<|content_audio_input|>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = InklingForConditionalGeneration(config).eval()
    sharpen_relative_bias(model)
    processor = InklingProcessor(
        feature_extractor=InklingFeatureExtractor(feature_size=8), image_processor=InklingImageProcessor(
            size={"height": 14, "width": 14}), tokenizer=tokenizer,
        chat_template=chat_template("<|content_image|><|image|>"), image_token="<|image|>", audio_token="<|audio|>",
        image_bos_token="<|content_image|>", audio_bos_token="<|content_audio_input|>")
    return model, processor
