"""VISTA's visual steering (Li & Shi, ICML 2025; its VSV part, as mitigv computes it): a vector per decoder layer,
added to that layer's output on the conditioned rows in every forward of the generation (docs/methods.md).

    v_l = H_img[l + 1][last prompt token] - H_text[l + 1][last prompt token]     l = 0 .. layers - 1
    h_l <- h_l + steer_strength * v_l

`H` are the language model's hidden states (`output_hidden_states`: the embeddings, then each layer's output, the
last one after the final norm) of the prompt with its visual input, unsteered, and of the prompt without it (pnd's
prior="text" rows). That last one is what transformers puts there: the language model's own output, its
`last_hidden_state` (after its final norm, whatever the family calls it: `norm`, `final_layernorm`, `embedding_norm`,
`layer_norm`, `norm_f`), read where the language model returns it (`text_decoder`). `steering_prefill` computes
them in the prefill of a paired generate call: one unsteered call of the conditioned prompt with the prior's tokens
packed after it (`pnd.decoding.packed`; where the prior does not pack, the two in calls of their own), into a cache
that is dropped, then the conditioned prompt steered.

Example:
    >>> from pnd.testing import tiny_model
    >>> from pnd.interventions.engine import decoder_layers
    >>> len(decoder_layers(tiny_model("llava_onevision")[0]))
    2
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from transformers import DynamicCache

from ..decoding.prior import masked_prefill
from .engine import decoder_layers, running_call, text_decoder

_CAPTURED: ContextVar[tuple[dict, list] | None] = ContextVar("pnd_captured_layer_outputs", default=None)


class SteerLayerOutputs:
    """VISTA's intervention: `steer_strength * v_l` added to decoder layer l's output on the conditioned rows."""

    rows, name = "conditioned", "VISTA"

    def __init__(self, strength: float):
        self.strength = strength


def steering_strength(interventions) -> float | None:
    """The strength of VISTA's steering among a processor's `interventions`; None where none steers."""
    return next((i.strength for i in interventions if isinstance(i, SteerLayerOutputs)), None)


def _hidden(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _layer_hook(index: int, module, args, output):
    """Decoder layer `index`'s forward hook: record its output at the positions `_capturing` asks for, add the
    running call's steering vector on its conditioned rows where `intervening` gives one."""
    capturing = _CAPTURED.get()
    if capturing is not None:
        captured, positions = capturing
        captured[index] = _hidden(output)[:, positions]
        return None
    call = running_call()
    if call is None or call.steering is None or "conditioned" not in call.rows:
        return None
    hidden, rows = _hidden(output), call.rows["conditioned"]
    vectors = call.steering[:, index, None].to(hidden.device, hidden.dtype)  # the layer's (`device_map="auto"`)
    if rows == slice(None):  # every row of the call (a decoding step on a dynamic cache): no copy of the others
        hidden = hidden + vectors
    else:
        start, stop, _ = rows.indices(hidden.shape[0])
        hidden = torch.cat([hidden[:start], hidden[start:stop] + vectors, hidden[stop:]])
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


def _final_hook(module, args, output):
    """The language model's forward hook: record its last hidden state (`hidden_states[-1]`, after the final norm) at
    the positions `_capturing` asks for."""
    capturing = _CAPTURED.get()
    if capturing is not None:
        captured, positions = capturing
        final = getattr(output, "last_hidden_state", None)
        captured[_FINAL] = (output[0] if final is None else final)[:, positions]


_FINAL = "final"  # the key of the language model's last hidden state among the captured layer outputs


class _SharedHook:
    """`hook` on `module` (`_layer_hook` on decoder layer `index`, `_final_hook` on the language model), once per
    module whatever the number of VISTA calls in flight on the model (each adds the steering of the call running in
    its own thread or context, `running_call`): registered by the first call, removed by the last call's `remove`."""

    _hooks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> [its hook's handle, calls using it]
    _lock = threading.Lock()

    def __init__(self, layer: torch.nn.Module, hook):
        self.layer, self.removed = layer, False
        with self._lock:
            entry = self._hooks.get(layer)
            if entry is None:
                entry = self._hooks[layer] = [layer.register_forward_hook(hook), 0]
            entry[1] += 1

    def remove(self) -> None:
        with self._lock:
            entry = None if self.removed else self._hooks.get(self.layer)
            self.removed = True
            if entry is not None:
                entry[1] -= 1
                if not entry[1]:
                    entry[0].remove()
                    del self._hooks[self.layer]


@contextmanager
def _capturing(positions: list[int]) -> Iterator[dict]:
    """Within the block, each decoder layer's output (rows, len(positions), hidden) at `positions`, by layer index,
    and the language model's last hidden state there (`_FINAL`)."""
    captured = {}
    token = _CAPTURED.set((captured, positions))
    try:
        yield captured
    finally:
        _CAPTURED.reset(token)


def _states(model, captured: dict) -> torch.Tensor:
    """(rows, layers, positions, hidden): the captured outputs as `hidden_states[1:]` holds them (the last the
    language model's own output, after its final norm); a ValueError where that last one is not a state of its last
    layer's output stream, to which VISTA adds its last vector."""
    states = [captured[index] for index in range(len(captured) - 1)]
    final = captured[_FINAL]
    if states[0].ndim != 3:
        raise ValueError(f"VISTA adds its vectors to one residual stream per decoder layer (rows, tokens, hidden); the "
                         f"decoder layers of {type(model).__name__} output {states[0].ndim}-D states (Gemma 3n: its "
                         "AltUp streams side by side). Use another method on this model.")
    if final.shape != states[-1].shape:
        raise ValueError(f"VISTA adds its last vector, from the language model's last hidden state (after its final "
                         f"norm), to its last decoder layer's output; on {type(model).__name__} those differ in width "
                         f"({final.shape[-1]} and {states[-1].shape[-1]}): its layers carry several residual streams "
                         "side by side that only its output mixes into one (Qwen4-Exp's hyper-connections), so the "
                         "last vector has no stream to steer. Use another method on this model.")
    states[-1] = final
    return torch.stack([state.to(states[0].device) for state in states], 1)  # layers on several devices: the first's


def steering_prefill(model, generation, conditioned, kwargs: dict, input_ids: torch.Tensor, strength: float,
                     packed_prefill=None):
    """The prefill of a VISTA generate call: (the conditioned outputs, steered; the prior rows' `PriorPrefill`).
    `conditioned` runs the conditioned rows, steered once `generation.steering` is set: the steering vectors, times
    `strength`, which the decoding steps then read there. `packed_prefill` (`pnd.decoding.packed`'s, where the prior
    packs): the unsteered pass carries the prior's tokens after the prompt, one call; None: the prior rows get a call
    of their own."""
    generation.hooks += [_SharedHook(layer, functools.partial(_layer_hook, index))
                         for index, layer in enumerate(decoder_layers(model))]
    generation.hooks.append(_SharedHook(text_decoder(model), _final_hook))
    unsteered = {**kwargs, "past_key_values": DynamicCache(config=model.config.get_text_config(decoder=True))}
    mode = generation.normalizer.prior
    if packed_prefill is not None:  # the prompt's last token; the prior's, last in every row (`prior.prior_slots`)
        with _capturing([input_ids.shape[1] - 1, -1]) as captured:
            _, prior = packed_prefill(model, conditioned, unsteered, mode)
        with_image, without = _states(model, captured).unbind(2)
    else:
        with _capturing([-1]) as captured:
            conditioned(**unsteered)
        with_image = _states(model, captured)[:, :, 0]
        with _capturing([-1]) as captured:
            prior = masked_prefill(model, input_ids, kwargs.get("attention_mask"), kwargs["position_ids"], mode, None,
                                   inputs=kwargs)
        without = _states(model, captured)[:, :, 0]
    generation.steering = strength * (with_image - without)
    return conditioned(**kwargs), prior
