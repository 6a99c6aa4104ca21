"""`generate`'s internals pnd calls (transformers 5.23): the generation config it will use, the first forward's position
ids, the attention mask it infers, the vision tower's outputs as it expands them, whether it compiles the decoding
steps; and a tokenizer whose `pad` pads one more key.

Example:
    >>> from pnd.testing import tiny_model
    >>> generation_config(tiny_model("llava")[0], {"max_new_tokens": 7}).max_new_tokens
    7
"""

from __future__ import annotations

import copy

from transformers import StaticCache


def generation_config(model, kwargs: dict):
    """The GenerationConfig that `model.generate(**kwargs)` will use (`_prepare_generation_config`)."""
    rest = {k: v for k, v in kwargs.items() if k != "generation_config"}
    config, _ = model._prepare_generation_config(kwargs.get("generation_config"), **rest)
    return config


def inferred_attention_mask(model, config, input_ids):
    """The attention mask `generate` gives a prompt passed without one: 0 on the padding token where it is not an eos
    token, else ones (`_prepare_special_tokens`, `_prepare_attention_mask_for_generation`; `config`: the call's)."""
    config = copy.deepcopy(config)
    model._prepare_special_tokens(config, device=input_ids.device)
    return model._prepare_attention_mask_for_generation(input_ids, config, {})


def position_ids_for_generation(model, input_ids, model_kwargs: dict):
    """The position ids `generate` gives the first forward (`_prepare_position_ids_for_generation`)."""
    return model._prepare_position_ids_for_generation(input_ids, model_kwargs)


def encode_visual_inputs(model, generate_kwargs: dict, expand_size: int = 1):
    """The vision tower's outputs as `generate` computes and expands them before the first forward
    (`_prepare_multimodal_encoder_kwargs_for_generation`, `_expand_multimodal_outputs`)."""
    encoded = model._prepare_multimodal_encoder_kwargs_for_generation(generate_kwargs)["mm_encoder_outputs"]
    if expand_size > 1:
        encoded = model._expand_multimodal_outputs(generate_kwargs["input_ids"], encoded, expand_size=expand_size)
    return encoded


def compiles_decoding(model, config) -> bool:
    """Whether `generate` with generation config `config` would run its decoding steps through a compiled forward, given
    a static cache (`_valid_auto_compile_criteria`: a CUDA-like device, or `compile_config` on any device)."""
    static = StaticCache(config=model.config.get_text_config(decoder=True), max_cache_len=1)
    return model._valid_auto_compile_criteria({"past_key_values": static}, config)


def padding_also(key: str) -> dict:
    """The methods of a tokenizer subclass whose `pad` also pads `key` (0 on the side it pads `input_ids`, as for
    `attention_mask`): `tokenizer.pad` pads the keys it knows in `_pad`, one example at a time, and leaves others as
    they are."""

    def _pad(self, encoded_inputs, **kwargs):
        extra = encoded_inputs.pop(key, None)
        padded = super(type(self), self)._pad(encoded_inputs, **kwargs)
        if extra is not None:
            zeros = [0] * (len(padded[self.model_input_names[0]]) - len(extra))
            left = (kwargs.get("padding_side") or self.padding_side) == "left"
            padded[key] = zeros + list(extra) if left else list(extra) + zeros
        return padded

    return {"_pad": _pad}
