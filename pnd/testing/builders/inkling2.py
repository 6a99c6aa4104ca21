"""Inkling 2 (inkling2): a ViT over 2x2 merged patches and a mixture-of-experts language model of hybrid layers, each an
attention with a relative position bias and a sink, short convolutions on its keys and values (dynamic ones in the
full-attention layers), and short convolutions after the attention and after the MLP; sliding-window hybrid layers
(`hybrid_sliding`) alternate with full ones (`hybrid`). No rotary embedding: the bias by distance is the text's only
sense of order, and the full layers scale their queries by the log of the position (`log_scaling_*`). The output head
has 8 rows past the vocabulary, which the model's forward cuts from its logits (`unpadded_vocab_size`), as the released
checkpoint's.

The image processor cuts a 56-pixel image into 14-pixel cells, one `<|image|>` placeholder each (4 x 4 = 16, nothing
else written); each cell is 2 x 2 native patches of 7 pixels. The window (8) and the bias's extent (8 in the full
layers, the window in the sliding ones) are shorter than the prompts, so that removing the image changes which keys a
token sees and the bias each gets; the bias's profiles are sharpened (`pnd.testing.sharpen_attention` scales them).
"""

from __future__ import annotations

import torch


def hybrid_text_config(tokenizer, **more) -> dict:
    """The tiny text config of both Inkling families: 4 hybrid layers, sliding (window 8) and full alternating, a bias
    extent of 8, a head 8 rows past the vocabulary; `more` adds the family's own fields."""
    return dict(
        vocab_size=len(tokenizer) + 8, unpadded_vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=4,
        layer_types=["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"], num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, swa_num_attention_heads=2, swa_num_key_value_heads=1, swa_head_dim=32,
        sliding_window_size=8, rel_extent=8, d_rel=4, moe_intermediate_size=32, n_routed_experts=2,
        num_experts_per_tok=1, max_position_embeddings=1024, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=None, **more)


def sharpen_relative_bias(model) -> None:
    """Draw the relative bias's profiles by distance sharp (std 2), so that a wrong distance changes the tokens."""
    for name, weight in model.named_parameters():
        if name.endswith("rel_logits_proj.proj"):
            torch.nn.init.normal_(weight, std=2.0)


def build(seed: int):
    from transformers import Inkling2Config, Inkling2ForConditionalGeneration, Inkling2ImageProcessor, Inkling2Processor

    from pnd.testing import chat_template, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<|image|>"])
    config = Inkling2Config(
        text_config=hybrid_text_config(tokenizer, n_layers_per_attn_res_block=2, log_scaling_n_floor=4),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, patch_size=7,
                           spatial_merge_size=2, posemb_grid_size=4, projection_hidden_dim=64, text_hidden_size=64),
        image_token_id=tokenizer.convert_tokens_to_ids("<|image|>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Inkling2ForConditionalGeneration(config).eval()
    sharpen_relative_bias(model)
    processor = Inkling2Processor(image_processor=Inkling2ImageProcessor(size={"height": 14, "width": 14}),
                                  tokenizer=tokenizer, chat_template=chat_template("<|image|>"),
                                  image_token="<|image|>")
    return model, processor
