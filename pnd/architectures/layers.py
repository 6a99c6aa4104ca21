"""What the prior does in each kind of language-model layer, declared in one table (docs/design.md §1, §4).

A layer type (a text config's `layer_types` entry, as transformers' caches read it) is one `LayerKind`: whether the
prior's layer masks the visual slots or sees the kept tokens only, what state its cache rows carry, and which of
pnd's fast paths apply. A model's `LayerPlan` combines its layers' kinds. A layer type missing from `LAYER_KINDS`,
or declared refused, is refused with its name: never a silent mask. Adding a layer type is one row here (and, for a
new kind of state, its row operations in `pnd/_compat/cache_rows.py`).

Example:
    >>> LAYER_KINDS["linear_attention"].prior
    'kept'
    >>> from pnd.testing import tiny_model
    >>> layer_plan(tiny_model("qwen3_5")[0].config.get_text_config(decoder=True)).kept_only
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from .._compat.cache_rows import cache_layer_types


@dataclass(frozen=True)
class LayerKind:
    """One layer type's rule.

    prior: "mask" (attention over the conditioned prompt's slots, the visual ones masked: exactly removal, since
        keys keep their positions), "kept" (the layer sees the kept tokens only: masking is not removal there) or
        None (a layer with no sequence mixing, or one reading another layer's cache).
    state: what its cache rows carry: "kv" (keys, values per slot), "recurrent" (convolution and recurrent states,
        no sequence axis), "hybrid" (both), "indexed" (keys, values and the indexer's keys per slot) or None.
    compact: the prior rows must hold the kept tokens side by side (an indexer that groups neighbouring slots),
        rather than in the conditioned prompt's slots with the visual ones masked.
    slot_window: the layer's window (sliding attention) or relative position bias (Inkling's) counts the conditioned
        prompt's slots: the prior rows keep the conditioned layout, and prior="text" (renumbered positions) is refused
        where the prior's own call cannot renumber them.
    in_slot: the layer reads slots, not only positions: an indexer that anchors key blocks to slots (MiniMax-M3, its
        indexer given the kept keys by `pnd._compat.repairs.indexer_keys`), or chunks of slots (Llama 4's chunked attention).
        The prior's prefill runs the whole prompt in its slots with the visual ones masked, so each kept token keeps
        its slot, and so its block or chunk.
    pads: a left-padded batch runs as each prompt alone. False where transformers' own layer differs under left
        padding (MiniMax-M3's blocks shift with it): pnd then refuses padded prompts.
    packs: the prior's prefill may ride in the conditioned prompt's forward (`pnd/decoding/packed.py`).
    static: pnd's static cache (`PairedStaticCache`) holds it.
    refused: why pnd refuses the layer type, or None.
    """

    prior: str | None
    state: str | None
    compact: bool = False
    slot_window: bool = False
    in_slot: bool = False
    pads: bool = True
    packs: bool = True
    static: bool = True
    refused: str | None = None


_RECURRENT = LayerKind(prior="kept", state="recurrent", packs=False, static=False)

LAYER_KINDS: dict[str, LayerKind] = {
    "full_attention": LayerKind(prior="mask", state="kv"),
    "sliding_attention": LayerKind(prior="mask", state="kv", slot_window=True, packs=False, static=False),
    "linear_attention": _RECURRENT,  # Gated DeltaNet (Qwen3.5, Qwen4), KDA (GLM-5-next), Mamba-2 (Nemotron-H)
    "conv": _RECURRENT,  # LFM2's short convolutions
    # DeepSeek-style sparse attention: an indexer picks top-k keys before any mask applies, grouping neighbouring
    # slots; on the kept tokens alone it picks among them only
    "indexed_attention": LayerKind(prior="kept", state="indexed", compact=True, packs=False, static=False),
    "dummy": LayerKind(prior=None, state=None),  # MoE / MLP blocks (Nemotron-H), KV-sharing layers (Gemma 4)
    # Llama 4's chunked attention: fixed chunks of slots, so the prior keeps every kept token in its conditioned slot
    # (a compacted prefill would shift the chunks); its cache holds the current chunk only, like a sliding window
    "chunked_attention": LayerKind(prior="mask", state="kv", slot_window=True, in_slot=True, packs=False, static=False),
    # MiniMax-M3's block-sparse attention: its indexer pools keys into blocks of slots and picks blocks by position
    # ids, so the kept tokens must stay at their slots (= positions), their indexer choosing among the kept keys only;
    # transformers' own layer differs under left padding (its indexer's TODO)
    "minimax_m3_sparse": LayerKind(prior="kept", state="indexed", in_slot=True, pads=False, packs=False, static=False),
    # Unlimited-OCR's reference sliding-window attention (R-SWA): every token sees the whole prompt and the last
    # `sliding_window` generated tokens. Masking the visual slots there is removal (the window counts generated tokens
    # only); pnd's row operations carry its cache layer (the prompt's keys apart from the window's), and
    # transformers' mask for it, which reads the 2-D attention mask at (cache index + the window's offset) for the
    # prompt's keys too, is repaired in pnd's paired steps (`pnd/architectures/unlimited_ocr.py`)
    "reference_sliding_attention": LayerKind(prior="mask", state="kv", packs=False, static=False),
    # DeepSeek Sparse Attention whose indexer scores each key alone and takes its top-k after the attention mask (the
    # masked keys' scores -inf), pooling nothing: Mistral Large 4's (also NoPE layers, log-position query scaling) and
    # dots3's (between sliding-window layers). Hiding a key there is removing it, unlike GLM-5-next's pools of
    # neighbouring slots, so the prior rows keep the prompt's slots (dots3's windows count them); the prior's prefill
    # still runs every kept token (pnd's reuse of the conditioned prefix carries keys and values, not indexer keys).
    # Keyed "<text model type>:<layer type>": the layer type's name is GLM-5-next's
    **dict.fromkeys(("mistral_large4_text:indexed_attention", "dots3_note_text:indexed_attention"),
                    LayerKind(prior="kept", state="indexed", packs=False, static=False)),
    # Inkling's: attention with short convolutions on its keys and values and after it (their states and the keys,
    # values in one cache layer: `pnd._compat.cache_rows.HybridState`). The convolutions see the kept tokens only; the attention's
    # relative position bias and sliding window count cache slots, which are positions in the conditioned prompt's
    # layout: so the prior rows keep that layout (the kept tokens in their slots, the visual ones masked), and the
    # prior's own prefill call, which runs the kept tokens side by side, computes the bias and the window from their
    # position ids (`pnd.architectures.inkling`)
    **dict.fromkeys(("hybrid", "hybrid_sliding"), LayerKind(prior="kept", state="hybrid", slot_window=True, packs=False,
                                                            static=False)),
}


@dataclass(frozen=True)
class LayerPlan:
    """How the prior runs on one model, from its layers' kinds.

    kept_only: some layer sees the kept tokens only: the prior's prefill runs every kept token through every layer.
    compact: the prior rows hold the kept tokens side by side, right-aligned in the prompt's slots.
    in_slot: the prior's prefill runs the whole prompt in its slots, visual keys hidden from attention and indexers.
    pads: every layer allows left-padded prompts.
    packs, static: every layer allows the packed prefill / pnd's static cache.
    """

    kinds: tuple[LayerKind, ...]
    kept_only: bool
    compact: bool
    packs: bool
    static: bool
    in_slot: bool = False
    pads: bool = True


def layer_kind(config, name: str) -> LayerKind | None:
    """The row of layer type `name` in a text config's model: its own ("<model type>:<layer type>", where families
    give one name to different layers) or the layer type's; None if it has none.

    Example:
        >>> from transformers import AutoConfig
        >>> layer_kind(AutoConfig.for_model("dots3_note").text_config, "indexed_attention").compact
        False
    """
    return LAYER_KINDS.get(f"{config.model_type}:{name}", LAYER_KINDS.get(name))


def layer_plan(config) -> LayerPlan:
    """The `LayerPlan` of a text config, or a ValueError naming a layer type pnd does not handle."""
    types = cache_layer_types(config)
    for index, name in enumerate(types):
        kind = layer_kind(config, name)
        why = ("pnd has no rule for it. A prior that only masked the visual slots there could silently differ from "
               "removing them, so pnd refuses") if kind is None else kind.refused
        if why:
            raise ValueError(
                f"pnd does not support the layer type {name!r} (layer {index} of {config.model_type}): {why}. Use plain "
                "generate, or declare the layer type in pnd/architectures/layers.py (docs/adding-a-family.md).")
    kinds = tuple(layer_kind(config, name) for name in types)
    compact, in_slot = any(k.compact for k in kinds), any(k.in_slot for k in kinds)
    if compact and (in_slot or any(k.slot_window for k in kinds)):
        raise ValueError(f"pnd does not support {config.model_type}: its indexed layers need the prior's tokens side "
                         "by side and its other layers need them in the prompt's slots.")
    if in_slot and any(k.prior == "kept" and not k.in_slot for k in kinds):
        raise ValueError(f"pnd does not support {config.model_type}: its slot-anchored indexers need the whole prompt "
                         "in its slots, which its recurrent layers must not see.")
    return LayerPlan(kinds, kept_only=any(k.prior == "kept" for k in kinds), compact=compact,
                     packs=all(k.packs for k in kinds), static=all(k.static for k in kinds), in_slot=in_slot,
                     pads=all(k.pads for k in kinds))


def check_unpadded(config, attention_mask, where: str) -> None:
    """A ValueError, naming `where` and the fix, if a layer of `config` does not allow left padding (`LayerKind.pads`)
    and `attention_mask` pads a prompt."""
    if attention_mask is None or bool(attention_mask.bool().all()):
        return
    plan = layer_plan(config)
    if plan.pads:
        return
    rows = (~attention_mask.bool().all(-1)).nonzero().flatten().tolist()
    names = sorted({t for t, k in zip(cache_layer_types(config), plan.kinds) if not k.pads})
    raise ValueError(
        f"{where}: prompt row(s) {rows} are padded (attention_mask 0), and {config.model_type}'s layer type(s) "
        f"{', '.join(map(repr, names))} anchor the indexer's key blocks to cache slots, so a padded prompt decodes "
        "differently from the same prompt alone even in plain transformers. Give every prompt of a batch the same "
        "length, or run one prompt per call.")


# the fix that every refusal of prior='text' names (M3ID, PAI and VISTA default to 'text')
USE_MASKED = "use prior='masked' (PriorNormalized's default; M3ID, PAI and VISTA take it too)."


def sliding_window(config) -> int | None:
    """The window of a text config's sliding-window attention layers; None when it has none."""
    window, types = getattr(config, "sliding_window", None), getattr(config, "layer_types", None)
    return window if types is None or "sliding_attention" in types else None


def check_text_prior(config) -> None:
    """Raise where prior='text' (the kept tokens at renumbered positions) cannot run on a text config's layers: a
    sliding window, or layers that read slots (indexer blocks, attention chunks) or count them (Inkling's bias)."""
    plan = layer_plan(config)
    if sliding_window(config) is not None:
        why = "sliding-window attention"
    elif plan.in_slot:
        why = "its layers read slots: indexer blocks or attention chunks, which renumbered positions would no longer match"
    elif any(kind.slot_window for kind in plan.kinds):
        names = sorted({t for t, k in zip(cache_layer_types(config), plan.kinds) if k.slot_window})
        why = (f"its layer types {', '.join(map(repr, names))} count the conditioned prompt's slots, which renumbered "
               "positions would no longer match")
    else:
        return
    raise ValueError(f"prior='text' is not supported on {config.model_type} ({why}): {USE_MASKED}")
