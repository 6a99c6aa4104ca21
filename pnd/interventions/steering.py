"""VISTA's visual steering (Li & Shi, ICML 2025; its VSV part, as mitigv computes it): a vector per decoder layer,
added to that layer's output on the conditioned rows in every forward of the generation (docs/methods.md).

    v_l = H_img[l + 1][last prompt token] - H_text[l + 1][last prompt token]     l = 0 .. layers - 1
    h_l <- h_l + steer_strength * v_l

`H` are the language model's hidden states (`output_hidden_states`: the embeddings, then each layer's output, the
last one after the final norm) of the prompt with its visual input, unsteered, and of the prompt without it (pnd's
prior="text" rows). `steering_prefill` computes them in the prefill of a paired generate call: the conditioned prompt
once unsteered into a cache that is dropped, the prior rows' prefill, then the conditioned prompt steered.

Example:
    >>> from pnd.testing import tiny_model
    >>> from pnd.interventions.engine import decoder_layers
    >>> len(decoder_layers(tiny_model("llava_onevision")[0]))
    2
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from transformers import DynamicCache

from ..decoding.prior import masked_prefill
from .engine import decoder_layers, running_call

_CAPTURED: ContextVar[dict | None] = ContextVar("pnd_captured_layer_outputs", default=None)


class SteerLayerOutputs:
    """VISTA's intervention: `steer_strength * v_l` added to decoder layer l's output on the conditioned rows."""

    rows, name = "conditioned", "VISTA"

    def __init__(self, strength: float):
        self.strength = strength


def _hidden(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _layer_hook(index: int, module, args, output):
    """Decoder layer `index`'s forward hook: record its output at the last position where `_capturing` asks, add the
    running call's steering vector on its conditioned rows where `intervening` gives one."""
    captured = _CAPTURED.get()
    if captured is not None:
        captured[index] = _hidden(output)[:, -1]
        return None
    call = running_call()
    if call is None or call.steering is None or "conditioned" not in call.rows:
        return None
    hidden = _hidden(output)
    start, stop, _ = call.rows["conditioned"].indices(hidden.shape[0])
    steered = hidden[start:stop] + call.steering[:, index, None].to(hidden.dtype)
    hidden = torch.cat([hidden[:start], steered, hidden[stop:]])
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


@contextmanager
def _capturing() -> Iterator[dict]:
    """Within the block, each decoder layer's output at the last position, by layer index."""
    captured = {}
    token = _CAPTURED.set(captured)
    try:
        yield captured
    finally:
        _CAPTURED.reset(token)


def _states(model, captured: dict) -> torch.Tensor:
    """(rows, layers, hidden): the captured outputs as `hidden_states[1:]` holds them (the last after the final norm)."""
    decoder = model.get_decoder()
    states = [captured[index] for index in range(len(captured))]
    states[-1] = decoder.norm(states[-1])
    return torch.stack(states, 1)


def steering_prefill(model, generation, conditioned, kwargs: dict, input_ids: torch.Tensor, strength: float):
    """The prefill of a VISTA generate call: (the conditioned outputs, steered; the prior rows' `PriorPrefill`).
    `conditioned` runs the conditioned rows, steered once `generation.steering` is set: the steering vectors, times
    `strength`, which the decoding steps then read there."""
    if not hasattr(model.get_decoder(), "norm"):
        raise ValueError(f"VISTA reads the language model's hidden states after its final norm, which pnd does not "
                         f"find on {type(model).__name__}.")
    generation.hooks += [layer.register_forward_hook(functools.partial(_layer_hook, index))
                         for index, layer in enumerate(decoder_layers(model))]
    with _capturing() as with_image:  # unsteered: no vectors yet
        conditioned(**{**kwargs, "past_key_values": DynamicCache(config=model.config.get_text_config(decoder=True))})
    with _capturing() as without:
        prior = masked_prefill(model, input_ids, kwargs.get("attention_mask"), kwargs["position_ids"],
                               generation.normalizer.prior, None, inputs=kwargs)
    generation.steering = strength * (_states(model, with_image) - _states(model, without))
    return conditioned(**kwargs), prior
