"""Interventions inside the model on one side of pnd's pair: declared once, run inside the paired calls.

An `AttentionIntervention` says which rows it acts on ("conditioned" or "contrast"), in which language-model layers
(`layers(n_layers)`), and what it does to those layers' attention (`apply`), given the key slots of the visual
expansion's placeholder tokens (read from the registry). `reach(model, interventions)` finds the attention module of
every layer an intervention names, or refuses the model with the reason (a recurrent or indexed layer, an attention
implementation other than SDPA; `pnd.decoding.packed.use_split_attention(model, always=True)` first switches an SDPA
model to pnd's SDPA). Within a paired call, `intervening(...)` says which rows of the call are which,
and pnd's attention (`pnd.decoding.packed.split_attention`) hands each reached layer's attention to
`attention_with_interventions`: the other rows and layers run SDPA as always, and an intervention recomputes only what
it changes (for PAI and ONLY, the newest query of its rows).

Example:
    >>> import pnd
    >>> from pnd.testing import tiny_model
    >>> from pnd.interventions.attention import DeactivateHeads
    >>> model = pnd.attach(tiny_model("llava_onevision")[0])  # its language model now runs pnd's SDPA
    >>> [layer for layer, _ in reach(model, (DeactivateHeads(layer=1),)).values()]
    [1]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch

from .._compat.masks import attention_implementation
from ..architectures import architecture_for
from ..architectures.layers import layer_kind

ROWS = ("conditioned", "contrast")
_PND_SDPA = "pnd_packed_sdpa"  # pnd's attention on an SDPA model (`pnd.decoding.packed`), where interventions reach


class AttentionIntervention:
    """An intervention in the attention of some language-model layers, on one side of the pair.

    Subclasses set `rows` and `name`, and define `layers` and `apply`."""

    rows: str = "conditioned"
    name: str = "intervention"
    where: str = ""  # the settings that choose its layers, for an error (e.g. "start_layer=2, end_layer=32")

    def layers(self, n_layers: int) -> range:
        """The decoder layers it acts in, for a language model of `n_layers` layers."""
        raise NotImplementedError

    def apply(self, site: AttentionSite, output: torch.Tensor) -> torch.Tensor:
        """The attention output (rows, queries, heads, head_dim) of its rows at `site`, changed."""
        raise NotImplementedError


@dataclass
class AttentionSite:
    """One attention call of one reached layer, for the rows an intervention acts on: its inputs as the attention
    function gets them (query (rows, heads, q, dim), key / value (rows, kv_heads, k, dim)), and, over the k key slots
    (computed once per call and rows, `attention_with_interventions`): `visual` (rows, 1, 1, k), the slots that hold
    the visual expansion's placeholder tokens, and `seen` (rows, 1, 1, k), the keys the newest query sees."""

    module: torch.nn.Module
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    scaling: float
    visual: torch.Tensor
    seen: torch.Tensor
    unseen: torch.Tensor  # ~seen

    def newest_scores(self) -> torch.Tensor:
        """The newest query's pre-softmax attention logits (rows, heads, 1, k), scaled, on every key: those it does
        not see included (`masked` hides them)."""
        rows, heads, _, dim = self.query.shape
        newest = _by_key_head(self.query[:, :, -1], self.key)  # (rows * kv_heads, heads // kv_heads, dim)
        logits = torch.bmm(newest, self.key.reshape(newest.shape[0], -1, dim).transpose(1, 2)) * self.scaling
        return logits.view(rows, heads, 1, -1)

    def masked(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` (rows, heads, 1, k) at -inf on the keys the newest query does not see."""
        return logits.masked_fill(self.unseen, -torch.inf)

    def newest_logits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(`masked(newest_scores())`, `seen`)."""
        return self.masked(self.newest_scores()), self.seen

    def weights(self, logits: torch.Tensor) -> torch.Tensor:
        """Softmax of `logits` over the keys, in float32 whatever the model's dtype (as eager attention's softmax
        returns them, before it casts them to the values' dtype): what a selection read from them (ONLY's) needs."""
        return torch.softmax(logits, dim=-1, dtype=torch.float32)

    def attend(self, logits: torch.Tensor) -> torch.Tensor:
        """`weights(logits)` (rows, heads, 1, k), in the values' dtype, times the values: (rows, 1, heads, dim), as
        the attention output is laid out."""
        weights = self.weights(logits)[:, :, 0].to(self.value.dtype)
        weights = _by_key_head(weights, self.value)  # (rows * kv_heads, heads // kv_heads, k)
        output = torch.bmm(weights, self.value.reshape(weights.shape[0], -1, self.value.shape[-1]))
        return output.view(self.query.shape[0], 1, self.query.shape[1], -1)


def _by_key_head(newest: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """The newest query's per-query-head rows (rows, heads, n) as (rows * kv_heads, heads // kv_heads, n), to meet
    `states` (rows, kv_heads, k, dim) as (rows * kv_heads, k, dim) in one batched matmul: the query heads that share a
    key / value head (grouped-query attention) side by side, the keys and values not repeated."""
    rows, heads, n = newest.shape
    return newest.reshape(rows * states.shape[1], heads // states.shape[1], n)


@dataclass(frozen=True)
class _Call:
    reached: dict  # id(attention module) -> (its decoder layer, the interventions acting there)
    rows: dict  # "conditioned" / "contrast" -> slice of the call's batch
    visual: torch.Tensor | None  # (batch of the call, slots) bool: the sequence's slots, this call's tokens included
    steering: torch.Tensor | None  # (rows, layers, hidden): what each layer's output gets on the conditioned rows
    keys: dict = field(default_factory=dict)  # (rows, key slots, mask) -> (mask, visual, seen, unseen): `_key_slots`
    visited: set = field(default_factory=set)  # the reached layers whose attention ran through pnd in this call


_CALL: ContextVar[_Call | None] = ContextVar("pnd_intervened_call", default=None)


@contextmanager
def intervening(reached: dict, visual: torch.Tensor | None, length: int = 0, steering: torch.Tensor | None = None,
                **rows: slice) -> Iterator[None]:
    """Within the block (this context only), attention calls of the `reached` layers (`reach`) run their
    interventions on the rows those name: `conditioned=slice(...)`, `contrast=slice(...)` (a role not given: no rows
    of it in this call). `visual` (batch of the call, prompt slots) marks the placeholder tokens' slots; `length`: the
    sequence's slots after this call (default: the prompt's). `steering`: added to each decoder layer's output on the
    conditioned rows (`pnd.interventions.steering`)."""
    if reached:
        visual = torch.nn.functional.pad(visual, (0, max(length - visual.shape[1], 0)))
    acting = reached or steering is not None
    call = _Call(reached, rows, visual, steering) if acting else None
    token = _CALL.set(call)
    try:
        yield
        if reached and not call.visited:
            raise ValueError(_HIDDEN)
    finally:
        _CALL.reset(token)


_HIDDEN = ("The intervention did not reach the language model's attention: its layers ran compiled (model.compile(), "
           "torch.compile of the model's forward or of a submodule), where pnd's attention does not see the call. "
           "PAI and ONLY run on the uncompiled model: generate with a model that was not compiled (a static cache "
           "with compile_config is fine: pnd then runs the intervened steps eagerly).")


def running_call() -> _Call | None:
    """The intervened call running in this context, if any."""
    return _CALL.get()


def attention_with_interventions(module, query, key, value, attention_mask, attend, **kwargs):
    """`attend(module, query, key, value, attention_mask, **kwargs)` (SDPA), then each running intervention that acts
    in this module's layer changes the output of its rows."""
    call = None if torch.compiler.is_compiling() else _CALL.get()
    layer, acting = (None, ()) if call is None else call.reached.get(id(module), (None, ()))
    if acting:
        call.visited.add(layer)
    output, weights = attend(module, query, key, value, attention_mask, **kwargs)
    for intervention in acting:
        rows = call.rows.get(intervention.rows)
        if rows is None:
            continue
        scaling = kwargs.get("scaling") or query.shape[-1] ** -0.5
        site = AttentionSite(module, query[rows], key[rows], value[rows], scaling,
                             *_key_slots(call, rows, key, attention_mask))
        start, stop, _ = rows.indices(output.shape[0])
        output = torch.cat([output[:start], intervention.apply(site, output[rows]), output[stop:]])
    return output, weights


def _key_slots(call: _Call, rows: slice, key: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    """(visual, seen, unseen), each (rows, 1, 1, keys), of `rows` over a layer's `key` slots under its `mask`, on the
    layer's device: computed once per call for all the layers that share them (a layer kind's mask, one key length,
    one device: a model split over several, `device_map="auto"`, has layers on each)."""
    keys = key.shape[2]
    memo = (rows.start, rows.stop, keys, id(mask), key.device)
    known = call.keys.get(memo)
    if known is not None and known[0] is mask:
        return known[1:]
    visual = call.visual[rows].to(key.device)  # a static cache's keys: every slot; a sliding window's: the last ones
    visual = torch.nn.functional.pad(visual, (0, keys - visual.shape[1])) if keys >= visual.shape[1] \
        else visual[:, -keys:]
    visual = visual[:, None, None]
    if mask is None:  # a causal call: the newest query sees every key
        seen = torch.ones_like(visual)
    else:
        last = (mask[rows] if mask.shape[0] > 1 else mask)[..., -1:, :]
        seen = last if last.dtype == torch.bool else last > torch.finfo(last.dtype).min
        seen = seen.expand(visual.shape[0], 1, 1, -1)
    call.keys[memo] = (mask, visual, seen, ~seen)
    return call.keys[memo][1:]


def text_decoder(model) -> torch.nn.Module:
    """The module that runs the language model's decoder layers (its `layers`) and returns their last hidden state:
    the registry's language model (`Architecture.language_model`: Kosmos-2's text transformer, BLIP-2's and Llama 4's
    decoder under their causal LM, ...), or the decoder it wraps (OPT's, under BLIP-2's `OPTModel`)."""
    language_model = architecture_for(model).language_model(model)
    for decoder in (language_model, getattr(language_model, "get_decoder", lambda: None)()):
        if isinstance(getattr(decoder, "layers", None), torch.nn.ModuleList):
            return decoder
    raise ValueError(f"pnd cannot find the decoder layers of {type(model).__name__}'s language model "
                     f"({type(language_model).__name__}), where the intervention acts.")


def decoder_layers(model) -> torch.nn.ModuleList:
    """The language model's decoder layers (`text_decoder(model).layers`)."""
    return text_decoder(model).layers


_ATTENTION_NAMES = ("self_attn", "mixer")  # a decoder layer's attention module: most families', Nemotron-H's blocks'


def layer_attention(layer: torch.nn.Module) -> torch.nn.Module | None:
    """The attention module of a decoder layer whose layer type is softmax attention; None where it has none."""
    return next((getattr(layer, name) for name in _ATTENTION_NAMES if hasattr(layer, name)), None)


def reach(model, interventions: Sequence[AttentionIntervention]) -> dict:
    """{id(attention module): (layer index, the interventions acting there)} for every layer the `interventions` act
    in; a ValueError naming the reason where one cannot be reached."""
    config = model.config.get_text_config(decoder=True)
    layers = decoder_layers(model)
    kinds = getattr(config, "layer_types", None) or ["full_attention"] * len(layers)
    implementation = attention_implementation(config)
    reached = {}
    for intervention in interventions:
        wanted = intervention.layers(len(layers))
        if not wanted:
            raise ValueError(f"{intervention.name} acts in no layer of this model's {len(layers)} decoder layers "
                             f"({intervention.where}): choose layers in [0, {len(layers)}).")
        if implementation != _PND_SDPA:
            raise ValueError(f"{intervention.name} changes the language model's attention weights, which pnd reaches "
                             f"in SDPA attention; this model runs {implementation!r}. Load the model with "
                             "attn_implementation='sdpa' and pnd.attach it.")
        for index in wanted:
            attention = layer_attention(layers[index])
            kind = layer_kind(config, kinds[index])
            if attention is None or kind is None or (kind.prior, kind.state) != ("mask", "kv"):
                raise ValueError(f"{intervention.name} acts on softmax attention over the prompt's slots, but decoder "
                                 f"layer {index} of this model is a {kinds[index]!r} layer (recurrent, indexed or "
                                 "without attention): choose other layers, or another model.")
            reached[id(attention)] = (index, reached.get(id(attention), (index, ()))[1] + (intervention,))
    return reached
