"""What the tiny Q-Former families (BLIP-2, InstructBLIP, InstructBLIP-Video) share: tokenizers, tiny configs and
the weights their initialisation leaves (almost) zero or too faint for the image to reach the tokens.

Example:
    >>> tokenizer, _, parts = qformer_parts("<image>")
    >>> parts["num_query_tokens"]
    4
"""

from __future__ import annotations

import torch

from ..parts import at_unit_gain


def qformer_parts(placeholder: str) -> tuple:
    """(tokenizer, Q-Former tokenizer, config parts) of a tiny Q-Former family whose placeholder is `placeholder`."""
    from pnd.testing import tiny_llama_text, tiny_tokenizer

    tokenizer = tiny_tokenizer([placeholder])
    qformer_tokenizer = tiny_tokenizer([])
    qformer_tokenizer.padding_side = "right"  # as the real ones (BERT's) pad: the Q-Former's positions are absolute
    parts = dict(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8, initializer_range=0.02),
        qformer_config=dict(vocab_size=len(qformer_tokenizer), hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64, encoder_hidden_size=32,
                            cross_attention_frequency=1, pad_token_id=qformer_tokenizer.pad_token_id),
        text_config=tiny_llama_text(tokenizer),
        num_query_tokens=4,
    )
    return tokenizer, qformer_tokenizer, parts


def reinitialise(model):
    """`model` with its zero-initialised query tokens drawn at random (else every query is the same vector) and the
    Q-Former's cross-attention at unit gain (at 0.02 what it adds to the unit-scale queries is faint: another image
    changed the logits by 4e-3 only)."""
    with torch.no_grad():
        model.query_tokens.normal_(0.0, 1.0)
    at_unit_gain(*(layer.crossattention for layer in model.qformer.encoder.layer if hasattr(layer, "crossattention")))
    return model


def with_template(processor):
    """`processor` with the tiny chat template, which writes no placeholder (the processor prepends them); its
    `__init__` drops a `chat_template` argument."""
    from pnd.testing import chat_template

    processor.chat_template = chat_template("", "")
    return processor
