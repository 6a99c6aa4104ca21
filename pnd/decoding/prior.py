"""The prior P(t) = P(t | v_empty): the same tokens with the whole visual expansion masked out (docs/design.md §1).

The masked prior never needs pixels or the vision tower: its prefill runs the language model on the
text tokens only, with the position ids they have in the conditioned pass, and lays the result out in a
KV-cache of the conditioned pass's length (visual slots zero and masked). Text before the first visual
token is the same in both passes: its keys/values are copied from the conditioned pass, not recomputed.
A model with layers that see the kept tokens only (`pnd/architectures/layers.py`: recurrent layers, e.g. Qwen3.5, LFM2; indexed
attention, e.g. Qwen4) runs every kept token through every layer instead: its recurrent states after the text before
the video are not in the conditioned cache, which holds them after the whole prompt; the prior rows keep the
recurrent states at the end of the kept tokens.

Example:
    >>> import pnd, torch
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> inputs = tiny_inputs(processor, "llava_onevision")
    >>> pnd.prior_logits(model, **inputs).shape[0]
    1
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._compat.cache_rows import cache_from_layers, layer_states, map_slots, map_states
from .._compat.generation import encode_visual_inputs
from .._compat.repairs import indexer_keys, kept_positions
from ..architectures import Architecture, architecture_for
from ..architectures.layers import LAYER_KINDS, check_text_prior, check_unpadded, layer_plan, sliding_window
from ..architectures.reported import carried_expansions, expansions_given


@dataclass
class PriorPrefill:
    """The prior rows after the prompt: next-token logits, KV per layer, and how to extend them."""

    logits: torch.Tensor  # (batch, vocab) logits for the first generated token
    layers: list  # per layer its states (`pnd._compat.cache_rows.layer_states`), per-slot ones of the full prompt length
    attends: torch.Tensor  # (batch, prompt_len) bool: prompt slots the prior rows may attend to
    position_offset: torch.Tensor  # cond positions minus prior positions of generated tokens


def gather_positions(position_ids: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Select sequence slots `index` (batch, n) from position ids shaped (batch, L) or (rows, batch, L)."""
    if position_ids.ndim == 2:
        return position_ids.gather(1, index)
    return position_ids.gather(2, index.expand(position_ids.shape[0], -1, -1))


def default_position_ids(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                         **inputs) -> torch.Tensor:
    """The position ids `generate` gives the conditioned pass (M-RoPE rows included for Qwen2-VL).

    `inputs` are the processor's other outputs; pixel inputs among them are ignored.
    """
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    metadata = {k: v for k, v in inputs.items() if not k.startswith(("pixel_values", "flattened_patches"))}
    return architecture_for(model).position_ids(model, input_ids, attention_mask, **metadata)


def check_visual_rows(visual: torch.Tensor) -> None:
    """Refuse a prompt row without a visual token (§3.7), from the mask of its visual expansion or placeholders."""
    if not bool(visual.any(dim=1).all()):
        rows = (~visual.any(dim=1)).nonzero().flatten().tolist()
        raise ValueError(f"No visual tokens in prompt row(s) {rows}: prior normalization needs an image or video "
                         "placeholder in every prompt. Build the inputs with the model's processor from a prompt that "
                         "contains the image/video (e.g. processor.apply_chat_template with a {'type': 'video'} part).")


def text_slots(visual: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mask of the attended tokens the prior sees, from the mask of the visual expansion, with the errors
    docs/design.md §3.7 asks for."""
    check_visual_rows(visual)
    text = attention_mask.bool() & ~visual
    if not bool(text[:, -1].all()):
        padded = (~attention_mask[:, -1].bool()).nonzero().flatten().tolist()
        if padded:
            raise ValueError(
                f"Prompt row(s) {padded} end with padding (attention_mask 0 in the last slot): prior-normalized "
                "decoding continues every row from its last slot, so pad on the left (processor.tokenizer."
                "padding_side = 'left', as generate expects for decoder-only models)."
            )
        raise ValueError(
            "A prompt ends with a visual token: the prior has no text token to predict from. End the prompt "
            "with text, e.g. apply_chat_template(..., add_generation_prompt=True)."
        )
    return text


@dataclass
class PriorSlots:
    """Where the prior's tokens sit in the conditioned prompt, and which of them its prefill computes."""

    text: torch.Tensor  # (batch, L) bool: attended text tokens, the slots the prior sees
    reused: torch.Tensor  # (batch, L) bool: text before the first visual token, KV copied from the conditioned pass
    prefix: int  # slots [0, prefix) hold every reused one
    index: torch.Tensor  # (batch, P) slots of the computed tokens, each row left-padded to P, order kept
    computed: torch.Tensor  # (batch, P) bool: False on that padding
    positions: torch.Tensor  # position ids of the computed tokens, shaped like the prompt's position ids
    targets: torch.Tensor  # (batch, P) the prior rows' slots of the computed tokens: `index`, or the last P slots
    attends: torch.Tensor  # (batch, L) bool: the slots the prior rows see (`text`, or the last P where computed)


def prior_slots(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                mode: str = "masked", reuse: bool = True, compact: bool = False) -> PriorSlots:
    """The prior's slots for a prompt ("masked": original positions; "text": renumbered), with docs/design.md §3.7's errors.

    With `reuse`, the text before a row's first visual token is not computed: it sees the same tokens at
    the same positions in both passes, so its keys/values are the conditioned pass's. With `compact` (`LayerPlan`),
    the prior rows hold the kept tokens side by side in the prompt's last slots, as a left-padded batch of the
    kept tokens alone; their position ids stay those of the conditioned pass.
    """
    length = input_ids.shape[1]
    architecture = architecture_for(model)
    reuse = reuse and architecture.reuses_text
    visual = architecture.expansion(model, input_ids, attention_mask)
    text = text_slots(visual, attention_mask)
    first_visual = visual.int().argmax(dim=1, keepdim=True)
    reused = text & (torch.arange(length, device=input_ids.device) < first_visual) if reuse else torch.zeros_like(text)
    computed = text & ~reused
    n_computed = int(computed.sum(dim=1).max())
    index = torch.sort(computed.to(torch.int8), dim=1, stable=True).indices[:, length - n_computed :]
    if mode == "text":
        first = getattr(architecture, "first_position", lambda model: 0)(model)  # Kosmos-2: its padding id + 1
        renumbered = (text.long().cumsum(-1) - 1).clamp(min=0).gather(1, index) + first
        positions = renumbered if position_ids.ndim == 2 else renumbered.expand(position_ids.shape[0], -1, -1)
    else:
        positions = gather_positions(position_ids, index)
    prefix = int(first_visual.max()) if reuse else 0
    computed = computed.gather(1, index)
    if not compact:
        return PriorSlots(text, reused, prefix, index, computed, positions, targets=index, attends=text)
    targets = torch.arange(length - n_computed, length, device=index.device).expand_as(index)
    attends = torch.cat([torch.zeros_like(text[:, : length - n_computed]), computed], 1)
    return PriorSlots(text, reused, prefix, index, computed, positions, targets=targets, attends=attends)


def lay_out_prior(slots: PriorSlots, states: torch.Tensor, computed_from: int) -> torch.Tensor:
    """Prior keys or values (batch, heads, L, dim) from `states` holding the reused slots [0, prefix) and the
    computed tokens from `computed_from` on; visual and padding slots are zero."""
    batch, length = slots.text.shape
    device = states.device  # the layer's, on a model split over devices (`device_map="auto"`)
    laid_out = states.new_zeros(batch, states.shape[1], length, states.shape[-1])
    target = slots.targets.to(device)[:, None, :, None].expand(-1, states.shape[1], -1, states.shape[-1])
    computed = states[:, :, computed_from:].where(slots.computed.to(device)[:, None, :, None], 0)  # padding: zeros
    laid_out.scatter_(2, target, computed)
    # after the scatter: a row's padding entries point at slots it does not compute, reused ones among them
    reused = slots.reused.to(device)[:, None, : slots.prefix, None]
    laid_out[:, :, : slots.prefix] = torch.where(reused, states[:, :, : slots.prefix], laid_out[:, :, : slots.prefix])
    return laid_out


def assemble_prefill(slots: PriorSlots, logits: torch.Tensor, layers, position_ids: torch.Tensor,
                  computed_from: int) -> PriorPrefill:
    """The `PriorPrefill` of per-layer states: per-slot ones laid out by `lay_out_prior`, recurrent states as they
    are (after the last computed token)."""
    laid_out = [map_slots(lambda states: lay_out_prior(slots, states, computed_from), layer) for layer in layers]
    offset = position_ids[..., -1] - slots.positions[..., -1]
    return PriorPrefill(logits=logits, layers=laid_out, attends=slots.attends, position_offset=offset)


def masked_prefill(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor,
    mode: str = "masked",
    shared: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
    inputs: dict | None = None,
) -> PriorPrefill:
    """Prefill the prior rows on the text tokens alone, in one language-model call of their own.

    `shared` is the conditioned pass's per-layer (keys, values) for the same prompt: the text before
    each row's first visual token is copied from it, and only the text after it is computed. A model with a
    layer that sees the kept tokens only (`pnd/architectures/layers.py`: recurrent, indexed) ignores it and computes every kept
    token (see the module's docstring). `inputs`, the processor's other outputs given with the prompt, tell a prefix
    LM's bidirectional prefix (`Architecture.bidirectional_prefix`; None: the prompt as its processor builds it).
    """
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    config = model.config.get_text_config(decoder=True)
    if mode == "text":
        check_text_prior(config)
    window, plan = sliding_window(config), layer_plan(config)
    if plan.in_slot:
        return _in_slot_prefill(model, config, input_ids, attention_mask, position_ids, mode)
    # no reuse through layers that see the kept tokens only (a recurrent state sums up the whole prompt), nor from
    # sliding-window layers that hold the window only
    reuse = shared is not None and not plan.kept_only and (
        window is None or all(keys is None or keys.shape[2] >= input_ids.shape[1] for keys, _ in shared))
    slots = prior_slots(model, input_ids, attention_mask, position_ids, mode, reuse=reuse, compact=plan.compact)
    # a layer without a cache of its own (Gemma 3n's KV-shared layers): (None, None)
    reused_layers = [(k, v) if k is None else (k[:, :, : slots.prefix], v[:, :, : slots.prefix])
                     for k, v in shared] if slots.prefix else None
    # every layer of this call keeps all its tokens (sliding-window ones too): lay_out_prior needs them
    cache = cache_from_layers(config, reused_layers, keep_all=True)
    attends = torch.cat([slots.reused[:, : slots.prefix], slots.computed], 1)
    architecture = architecture_for(model)
    prefix = architecture.bidirectional_prefix(inputs, attention_mask)
    both_ways = None if prefix is None else prefix.gather(1, slots.index) & slots.computed
    key_positions = torch.cat([position_ids[..., : slots.prefix], slots.positions], -1)
    language_model = architecture.language_model(model)  # its dtype, the masks': not the vision tower's
    with kept_positions(slots.positions, key_positions):  # the call's tokens side by side, at these positions
        hidden = language_model(
            input_ids=input_ids.gather(1, slots.index),
            attention_mask=attends.long() if window is None and both_ways is None else prefill_masks(
                config, slots, attends, window, language_model.dtype, both_ways),
            position_ids=slots.positions,
            past_key_values=cache,
            use_cache=True,
        ).last_hidden_state
    return assemble_prefill(slots, output_logits(model, hidden[:, -1]), layer_states(cache), position_ids,
                            computed_from=slots.prefix)


def _in_slot_prefill(model, config, input_ids, attention_mask, position_ids, mode: str) -> PriorPrefill:
    """The prior's prefill on a model whose indexers anchor key blocks to slots (`LayerKind.in_slot`, MiniMax-M3): one
    call on the whole prompt in its slots, at its positions, the visual slots masked out of attention and out of the
    indexers' choice (`indexer_keys`), so that every kept token sees the kept tokens before it only, as if the visual
    expansion were absent. The states of the visual slots are dropped (zero, masked)."""
    check_unpadded(config, attention_mask, "pnd's prior")
    slots = prior_slots(model, input_ids, attention_mask, position_ids, mode, reuse=False)
    cache = cache_from_layers(config, keep_all=True)  # chunked layers too keep every slot: `computed` gathers them
    with indexer_keys(slots.text):
        hidden = architecture_for(model).language_model(model)(
            input_ids=input_ids, attention_mask=slots.text.long(), position_ids=position_ids, past_key_values=cache,
            use_cache=True).last_hidden_state

    def computed(states):  # the computed tokens' states, in the order `lay_out_prior` expects them
        index = slots.index.to(states.device)[:, None, :, None]  # the layer's device (`device_map="auto"`)
        return states.gather(2, index.expand(-1, states.shape[1], -1, states.shape[-1]))

    layers = [map_states(computed, state) for state in layer_states(cache)]
    return assemble_prefill(slots, output_logits(model, hidden[:, -1]), layers, position_ids, computed_from=0)


def output_embeddings(model) -> torch.nn.Module:
    """The layer that maps hidden states to logits: the model's output embeddings, or its language model's where the
    top model has none (Nemotron-H Omni leaves its logits to `model.language_model`)."""
    head = model.get_output_embeddings()
    return head if head is not None else model.language_model.get_output_embeddings()


MULTIPLIED_BY_LOGITS_SCALING = ("hyperclovax",)  # text model types whose forward multiplies by `logits_scaling`


def output_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The model's logits for last hidden states, with its final scaling: Granite's `logits_scaling` divisor (HyperCLOVA
    X's multiplier: MuP; Inkling's `logits_mup_width_multiplier`, before the head), Muse Glimmer's
    `output_multiplier`, Gemma's `final_logit_softcapping`; the vocabulary its forward cuts a padded head to
    (Inkling's `unpadded_vocab_size`); and the tokens its forward suppresses."""
    configs = (model.config, model.config.get_text_config(decoder=True))

    def setting(name: str):  # the first config that sets `name` (top-level or text)
        return next((getattr(c, name) for c in configs if getattr(c, name, None)), None)

    if divisor := setting("logits_mup_width_multiplier"):  # Inkling: the last hidden states divided before the head
        hidden = hidden / divisor
    logits = output_embeddings(model)(hidden)
    if scaling := setting("logits_scaling"):
        multiplies = configs[1].model_type in MULTIPLIED_BY_LOGITS_SCALING
        logits = logits * scaling if multiplies else logits / scaling
    if multiplier := setting("output_multiplier"):  # Muse Glimmer: logits * output_multiplier, then the softcap
        logits = logits * multiplier
    if cap := setting("final_logit_softcapping"):
        logits = torch.tanh(logits / cap) * cap
    if vocabulary := setting("unpadded_vocab_size"):  # Inkling: a head padded past the vocabulary, cut by its forward
        logits = logits[..., :vocabulary]
    if suppressed := architecture_for(model).suppressed_tokens(model):  # Chameleon's image tokens
        logits[..., suppressed] = torch.finfo(logits.dtype).min
    return logits


def prefill_masks(config, slots: PriorSlots, attended: torch.Tensor, window: int | None, dtype: torch.dtype,
                  both_ways: torch.Tensor | None = None):
    """Additive attention masks of the prior's own call on a sliding-window model or a prefix LM, per layer type.

    The computed tokens sit side by side in that call, but a sliding-window layer must see the `window` slots
    before each token in the conditioned prompt (visual slots in them masked), as the decoding steps do: so the
    masks are causal over the prompt's slots, and on sliding layers keep keys less than `window` slots back.
    `attended` (batch, keys) marks the call's keys the prior may see: the reused prefix's, then the computed tokens'.
    `both_ways` (batch, computed) marks the computed tokens of a prefix LM's bidirectional prefix: each sees all of
    them, before and after it, window or not (transformers' `blockwise_overlay`, or-ed after the window).

    Example (a prefix LM: the first two kept tokens see each other, the third sees both causally):
        >>> import torch
        >>> from transformers import GemmaConfig
        >>> index, computed = torch.tensor([[0, 2, 3]]), torch.tensor([[True, True, True]])
        >>> slots = PriorSlots(None, None, 0, index, computed, None, index, None)
        >>> mask = prefill_masks(GemmaConfig(), slots, computed, None, torch.float32, torch.tensor([[True, True, False]]))
        >>> (mask[0, 0] == 0).long().tolist()
        [[1, 1, 0], [1, 1, 0], [1, 1, 1]]
    """
    batch, prefix = slots.index.shape[0], slots.prefix
    key_slots = torch.cat([torch.arange(prefix, device=slots.index.device).expand(batch, -1), slots.index], 1)
    behind = slots.index[:, :, None] - key_slots[:, None, :]  # (batch, queries, keys)
    allowed = attended[:, None, :] & (behind >= 0)
    own = torch.eye(slots.index.shape[1], dtype=torch.bool, device=behind.device)
    allowed[:, :, prefix:] |= own  # a padding query sees itself: no fully masked row
    prefixed = torch.zeros_like(allowed)
    if both_ways is not None:
        prefixed[:, :, prefix:] = both_ways[:, :, None] & both_ways[:, None, :]

    def additive(mask):
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)[:, None]

    full = additive(allowed | prefixed)
    sliding = full if window is None else additive(allowed & (behind < window) | prefixed)
    types = getattr(config, "layer_types", None)
    if types is None:
        return sliding
    def kept_only(kind):  # LFM3's short convolutions: the 2-D padding mask of the call
        return kind in LAYER_KINDS and LAYER_KINDS[kind].state == "recurrent"

    return {kind: attended.long() if kept_only(kind) else sliding if kind == "sliding_attention" else full
            for kind in set(types)}


def blank_encoder_outputs(model, architecture: Architecture, generate_kwargs: dict, expand_size: int) -> dict:
    """Vision-tower outputs for blank pixel inputs (uniform frames, `Architecture.blank_pixels`), laid out as
    `generate` lays out its own."""
    blank = {k: architecture.blank_pixels(generate_kwargs[k]) for k in architecture.pixel_keys
             if generate_kwargs.get(k) is not None}
    if not blank:
        raise ValueError("prior='blank' needs the pixel inputs (pixel_values / pixel_values_videos) in generate(...).")
    return encode_visual_inputs(model, {**generate_kwargs, **blank}, expand_size)


def blank_prefill(model, forward, prefill_kwargs: dict, blank_outputs: dict) -> PriorPrefill:
    """Prefill the prior rows through the whole model with blank frames in place of the real ones."""
    cache = cache_from_layers(model.config.get_text_config(decoder=True))
    outputs = forward(**{**prefill_kwargs, "mm_encoder_outputs": blank_outputs, "past_key_values": cache})
    input_ids, attention_mask = prefill_kwargs["input_ids"], prefill_kwargs.get("attention_mask")
    attends = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    offset = torch.zeros_like(prefill_kwargs["position_ids"][..., -1])
    return PriorPrefill(logits=outputs.logits[:, -1], layers=layer_states(cache), attends=attends,
                        position_offset=offset)


@torch.no_grad()
def prior_logits(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    mode: str = "masked",
    **inputs,
) -> torch.Tensor:
    """Next-token logits of the prior for a processor's inputs; pixel inputs are accepted and ignored.

    Args:
        model: a supported vision-language model (attached or not).
        input_ids, attention_mask, position_ids: the processor's outputs (position ids default to the ones
            `generate` would use).
        mode: "masked" (default), the canonical prior: visual tokens masked out, positions kept; "text": the
            visual tokens dropped and positions renumbered. ("blank" needs the vision tower and is only
            available while decoding.)
        **inputs: the processor's other outputs (pixels are ignored).

    Returns:
        (batch, vocab) logits of the next token under the prior.

    Example:
        >>> import pnd
        >>> from pnd.testing import tiny_model, tiny_inputs
        >>> model, processor = tiny_model("qwen2_vl")
        >>> pnd.prior_logits(model, **tiny_inputs(processor, "qwen2_vl")).shape[0]
        1
    """
    if mode not in ("masked", "text"):
        raise ValueError(f"prior_logits supports mode 'masked' or 'text', got {mode!r}.")
    architecture_for(model).prepare(model)  # a family's repair the prior's prefill needs (Inkling 2's relative bias)
    carried = carried_expansions(inputs, input_ids, attention_mask)  # the expansion the processor's outputs carry
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if position_ids is None:
        position_ids = default_position_ids(model, input_ids, attention_mask, **inputs)
    with expansions_given(carried):
        return masked_prefill(model, input_ids, attention_mask, position_ids, mode, inputs=inputs).logits
