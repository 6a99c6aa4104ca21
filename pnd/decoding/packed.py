"""Packed prefill: the prior's text tokens ride along in the conditioned prompt's forward call.

The prior's prefill computes only the text after the first visual token (`prior.prior_slots`). Run as
a call of its own, those few tokens cost a second read of every weight. Here they are appended to the
conditioned prompt instead, so that one forward call runs [prompt | prior tokens]: the weights are read
once. Attention is split in two (`split_attention`): the prompt attends causally to itself exactly as in
a plain forward (PyTorch's fast causal kernel when nothing is padded), and the prior tokens attend to the
reused text before the video and to each other. Used for models whose language model runs SDPA
attention over the whole context; the others (eager, flash-attention, sliding-window attention) get
the prior's own call (`prior.masked_prefill`), and so do models with recurrent layers (Qwen3.5), whose
state would carry the prompt into the prior tokens that follow it in the packed row.

The split runs as an attention implementation of its own, registered with SDPA's masks. `pnd.attach` switches
an SDPA model's language model to it once (`use_split_attention`) and `pnd.detach` switches it back
(`stop_split_attention`); outside a packed call, in any thread, it is plain SDPA, so nothing is switched per call.

Example:
    >>> from pnd.testing import tiny_model
    >>> model, _ = tiny_model("llava_onevision")
    >>> packs_prior(model, {"logits_to_keep": 1})  # generate's first call on an SDPA model
    True
    >>> model.set_attn_implementation("eager")
    >>> packs_prior(model, {"logits_to_keep": 1})  # the prior then gets a call of its own
    False
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import torch

from .._compat.masks import (
    attention_implementation,
    register_sdpa_attention,
    sdpa_attention_forward,
    set_attention_implementation,
)
from ..architectures import architecture_for
from ..architectures.layers import layer_plan
from ..interventions.engine import attention_with_interventions
from .prior import assemble_prefill, prior_slots

_ATTENTION = "pnd_packed_sdpa"
_PROMPT: ContextVar[tuple[int, bool, int]] = ContextVar("pnd_packed_prompt")  # (prompt length, prompt is unpadded,
# the prompt's slots the prior tokens may see: [0, prefix), the reused text before the video)
_OUTPUT_OPTIONS = ("output_hidden_states", "output_attentions")


def split_attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA on a packed [prompt | prior tokens] sequence: the prompt part as a plain forward runs it
    (causal kernel, no mask, when unpadded; the interventions on the conditioned rows acting there), the prior part
    with its rows of `attention_mask`, over the only keys it may see: the reused text before the video and the prior
    tokens."""
    # any forward outside a packed call (another thread's, a decoding step's), or one torch.compile traces (the packed
    # mask makes plain SDPA exact, the split only saves time), or one without a mask (not the language model's: the
    # packed call gives it one; Kosmos-2.5's latent queries attend to the image with its text attention): plain SDPA
    packed = None if torch.compiler.is_compiling() else _PROMPT.get(None)
    if packed is None or attention_mask is None:  # and where interventions act, theirs (`pnd.interventions.engine`)
        return attention_with_interventions(module, query, key, value, attention_mask, sdpa_attention_forward, **kwargs)
    length, unpadded, prefix = packed
    prompt_mask = None if unpadded else attention_mask[:, :, :length, :length]
    prompt, _ = attention_with_interventions(module, query[:, :, :length], key[:, :, :length], value[:, :, :length],
                                             prompt_mask, sdpa_attention_forward, **kwargs)  # PAI's, on the prompt
    prior, _ = sdpa_attention_forward(module, query[:, :, length:], _seen(key, prefix, length, -2),
                                      _seen(value, prefix, length, -2),
                                      _seen(attention_mask[:, :, length:], prefix, length, -1), **kwargs)
    return torch.cat([prompt, prior], dim=1), None  # (batch, tokens, heads, dim)


def _seen(states: torch.Tensor, prefix: int, length: int, dim: int) -> torch.Tensor:
    """The slots of `states` along `dim` that a packed call's prior tokens may see: [0, prefix) and [length, end)."""
    return torch.cat([states.narrow(dim, 0, prefix), states.narrow(dim, length, states.shape[dim] - length)], dim)


register_sdpa_attention(_ATTENTION, split_attention)  # with SDPA's own masks outside the packed call


def sdpa_over_whole_context(model) -> bool:
    """Whether every layer of the language model runs SDPA attention over the whole context: no sliding window, and
    every layer's kind allows a packed prefill (`pnd/architectures/layers.py`: no recurrent or indexed layer). Its
    layers then all read one boolean 4D mask."""
    config = model.config.get_text_config(decoder=True)
    return (attention_implementation(config) in ("sdpa", _ATTENTION) and getattr(config, "sliding_window", None) is None
            and layer_plan(config).packs)


def packs_prior(model, kwargs: dict) -> bool:
    """Whether this prefill call can carry the prior's tokens: SDPA attention over the whole context
    (`sdpa_over_whole_context`), a causal prompt (no bidirectional visual block), and only the last logits asked for."""
    return (sdpa_over_whole_context(model) and architecture_for(model).causal_prompt
            and kwargs.get("logits_to_keep") == 1 and not any(kwargs.get(k) for k in _OUTPUT_OPTIONS))


def packed_prefill(model, forward, kwargs: dict, mode: str):
    """Run `forward(**kwargs)` (generate's first call) with the prior's tokens appended to every row.

    Returns the conditioned outputs as a plain call would return them (the cache trimmed to the prompt,
    logits of the last prompt token) and the prior's `PriorPrefill`.
    """
    input_ids, position_ids, cache = kwargs["input_ids"], kwargs["position_ids"], kwargs["past_key_values"]
    attention_mask = kwargs.get("attention_mask")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    slots = prior_slots(model, input_ids, attention_mask, position_ids, mode)
    length, extra = input_ids.shape[1], slots.index.shape[1]

    packed = dict(kwargs)
    prior_ids = input_ids.gather(1, slots.index).where(slots.computed, input_ids[:, -1:])  # padding: a text id
    packed["input_ids"] = torch.cat([input_ids, prior_ids], 1)
    for key in architecture_for(model).token_inputs:  # per-token metadata: 0 (text) for the prior tokens
        if kwargs.get(key) is not None:
            packed[key] = torch.cat([kwargs[key], kwargs[key].new_zeros(kwargs[key].shape[0], extra)], 1)
    packed["position_ids"] = torch.cat([position_ids, slots.positions], -1)
    packed["attention_mask"] = _packed_mask(attention_mask.bool(), slots)
    # the last prompt token's and the last prior token's (extra >= 1: a prompt ends with text), as a slice: no index
    # tensor to place on the device of the last layer (`device_map="auto"` over several GPUs)
    packed["logits_to_keep"] = slice(length - 1, None, extra)
    use_split_attention(model)  # attach did it; again if the model was switched back to SDPA since
    with _packed_attention(length, unpadded=bool(attention_mask.all()), prefix=slots.prefix):
        outputs = forward(**packed)

    layers = []
    for layer in cache.layers:
        layers.append((layer.keys, layer.values))
        layer.keys, layer.values = layer.keys[:, :, :length], layer.values[:, :, :length]
    prior = assemble_prefill(slots, outputs.logits[:, 1], layers, position_ids, computed_from=length)
    outputs.logits = outputs.logits[:, :1]
    return outputs, prior


def _packed_mask(attended: torch.Tensor, slots) -> torch.Tensor:
    """(batch, 1, L+P, L+P) bool, causal over [prompt | prior tokens] and their attended tokens, except that the
    prior tokens see only the reused text of the prompt. Padding queries see themselves: no row is fully masked."""
    keys = torch.cat([attended, slots.computed], 1)
    total, length = keys.shape[1], attended.shape[1]
    allowed = keys[:, None, :] & torch.ones(total, total, dtype=torch.bool, device=keys.device).tril()
    allowed[:, length:, :length] = slots.reused[:, None, :]
    allowed |= torch.eye(total, dtype=torch.bool, device=keys.device)
    return allowed[:, None]


def use_split_attention(model, always: bool = False) -> None:
    """Run the language model's attention through `split_attention` if it runs SDPA (plain SDPA outside a packed
    call) and its prior may pack (`LayerPlan.packs`), or `always` (where interventions act: `pnd.interventions`).
    Idempotent, and safe while other threads run the model: it never switches anything back. A model whose prior never
    packs keeps its name "sdpa" otherwise: MiniMax-M3 builds its sparse layers' block masks only under that name (under
    another, its sparse layers would attend densely; interventions refuse its layers)."""
    config = model.config.get_text_config(decoder=True)
    if attention_implementation(config) == "sdpa" and (always or layer_plan(config).packs):
        set_attention_implementation(config, _ATTENTION)


def stop_split_attention(model) -> None:
    """Undo `use_split_attention`: the language model runs plain SDPA again."""
    config = model.config.get_text_config(decoder=True)
    if attention_implementation(config) == _ATTENTION:
        set_attention_implementation(config, "sdpa")


@contextmanager
def attention_named_sdpa(model):
    """Within this context, the language model's attention runs under its own name "sdpa" again: transformers'
    continuous batching (`cache_implementation="paged"`) builds its attention masks for the names it knows only. Meant
    for a plain call: a paired call in another thread meanwhile would switch `split_attention` back on."""
    config = model.config.get_text_config(decoder=True)
    previous = attention_implementation(config)
    stop_split_attention(model)
    try:
        yield
    finally:
        set_attention_implementation(config, previous)


@contextmanager
def _packed_attention(length: int, unpadded: bool, prefix: int):
    """Within this context (this thread's), `split_attention` splits a packed [prompt | prior tokens] call whose prior
    tokens see no prompt slot from `prefix` on."""
    token = _PROMPT.set((length, unpadded, prefix))
    try:
        yield
    finally:
        _PROMPT.reset(token)
