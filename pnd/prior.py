"""The prior P(t) = P(t | v_empty): the same tokens with every visual position masked out (DESIGN.md §1).

The masked prior never needs pixels or the vision tower: its prefill runs the language model on the
text tokens only, with the position ids they have in the conditioned pass, and lays the result out in a
KV-cache of the conditioned pass's length (visual slots zero and masked). Text before the first visual
token is the same in both passes: its keys/values are copied from the conditioned pass, not recomputed.

Example:
    >>> import pnd, torch
    >>> from pnd.tiny import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> inputs = tiny_inputs(processor, "llava_onevision")
    >>> pnd.prior_logits(model, **inputs).shape[0]
    1
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .architectures import Architecture, architecture_for


@dataclass
class PriorPrefill:
    """The prior rows after the prompt: next-token logits, KV per layer, and how to extend them."""

    logits: torch.Tensor  # (batch, vocab) logits for the first generated token
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values), full prompt length
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
    metadata = {k: v for k, v in inputs.items() if not k.startswith("pixel_values")}
    model_kwargs = {"attention_mask": attention_mask, **metadata}
    base = model.model
    saved_rope_deltas = getattr(base, "rope_deltas", None)  # Qwen2-VL keeps shared state here: restore it
    try:
        return model._prepare_position_ids_for_generation(input_ids, model_kwargs)
    finally:
        if hasattr(base, "rope_deltas"):
            base.rope_deltas = saved_rope_deltas


def text_slots(architecture: Architecture, config, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """Mask of the attended text tokens (what the prior sees), with the errors DESIGN.md §3.7 asks for."""
    visual = architecture.visual_mask(config, input_ids)
    if not bool(visual.any(dim=1).all()):
        rows = (~visual.any(dim=1)).nonzero().flatten().tolist()
        raise ValueError(
            f"No visual tokens in prompt row(s) {rows}: prior normalization needs an image or video "
            "placeholder in every prompt. Build the inputs with the model's processor from a prompt that "
            "contains the image/video (e.g. processor.apply_chat_template with a {'type': 'video'} part)."
        )
    text = attention_mask.bool() & ~visual
    if not bool(text[:, -1].all()):
        raise ValueError(
            "A prompt ends with a visual token: the prior has no text token to predict from. End the prompt "
            "with text, e.g. apply_chat_template(..., add_generation_prompt=True)."
        )
    return text


def masked_prefill(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor,
    mode: str = "masked",
    shared: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> PriorPrefill:
    """Prefill the prior rows on the text tokens alone ("masked": original positions; "text": renumbered).

    `shared` is the conditioned pass's per-layer (keys, values) for the same prompt. The text tokens
    before a row's first visual token see the same tokens at the same positions in both passes, so their
    keys/values are copied from it; only the text after the first visual token is computed.
    """
    architecture = architecture_for(model)
    batch, length = input_ids.shape
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    text = text_slots(architecture, model.config, input_ids, attention_mask)
    slots = torch.arange(length, device=input_ids.device)
    first_visual = architecture.visual_mask(model.config, input_ids).int().argmax(dim=1, keepdim=True)
    reused = text & (slots < first_visual) if shared is not None else torch.zeros_like(text)
    computed = text & ~reused
    prefix = int(first_visual.max()) if shared is not None else 0  # slots [0, prefix) hold every reused one

    # Compact each row to its computed tokens, left-padded to the longest row, order kept.
    n_computed = int(computed.sum(dim=1).max())
    index = torch.sort(computed.to(torch.int8), dim=1, stable=True).indices[:, length - n_computed :]
    compact_mask = computed.gather(1, index)
    if mode == "text":
        renumbered = (text.long().cumsum(-1) - 1).clamp(min=0).gather(1, index)
        compact_positions = renumbered if position_ids.ndim == 2 else renumbered.expand(position_ids.shape[0], -1, -1)
    else:
        compact_positions = gather_positions(position_ids, index)

    reused_layers = [(k[:, :, :prefix], v[:, :, :prefix]) for k, v in shared] if prefix else None
    cache = DynamicCache(ddp_cache_data=reused_layers, config=model.config.get_text_config(decoder=True))
    hidden = model.model.language_model(
        input_ids=input_ids.gather(1, index),
        attention_mask=torch.cat([reused[:, :prefix], compact_mask], 1).long(),
        position_ids=compact_positions,
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state
    logits = model.get_output_embeddings()(hidden[:, -1])

    layers = []
    keep = reused[:, None, :prefix, None]
    for layer in cache.layers:
        full_shape = (batch, layer.keys.shape[1], length, layer.keys.shape[-1])
        target = index[:, None, :, None].expand(-1, full_shape[1], -1, full_shape[3])
        full = []
        for states in (layer.keys, layer.values):
            laid_out = states.new_zeros(full_shape)
            laid_out[:, :, :prefix] = states[:, :, :prefix] * keep  # reused slots; visual/padding ones stay 0
            full.append(laid_out.scatter_(2, target, states[:, :, prefix:]))
        layers.append(tuple(full))
    offset = position_ids[..., -1] - compact_positions[..., -1]
    return PriorPrefill(logits=logits, layers=layers, attends=text, position_offset=offset)


def blank_encoder_outputs(model, architecture: Architecture, generate_kwargs: dict, expand_size: int) -> dict:
    """Vision-tower outputs for all-zero pixel inputs (uniform frames), laid out as `generate` lays out its own."""
    blank = {k: torch.zeros_like(generate_kwargs[k]) for k in architecture.pixel_keys if generate_kwargs.get(k) is not None}
    if not blank:
        raise ValueError("prior='blank' needs the pixel inputs (pixel_values / pixel_values_videos) in generate(...).")
    encoded = model._prepare_multimodal_encoder_kwargs_for_generation({**generate_kwargs, **blank})["mm_encoder_outputs"]
    if expand_size > 1:
        encoded = model._expand_multimodal_outputs(generate_kwargs["input_ids"], encoded, expand_size=expand_size)
    return encoded


def blank_prefill(model, forward, prefill_kwargs: dict, blank_outputs: dict) -> PriorPrefill:
    """Prefill the prior rows through the whole model with blank frames in place of the real ones."""
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    outputs = forward(**{**prefill_kwargs, "mm_encoder_outputs": blank_outputs, "past_key_values": cache})
    input_ids, attention_mask = prefill_kwargs["input_ids"], prefill_kwargs.get("attention_mask")
    attends = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    offset = torch.zeros_like(prefill_kwargs["position_ids"][..., -1])
    layers = [(layer.keys, layer.values) for layer in cache.layers]
    return PriorPrefill(logits=outputs.logits[:, -1], layers=layers, attends=attends, position_offset=offset)


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

    `mode="masked"` is the canonical prior (DESIGN.md §1); `"text"` drops the visual tokens and
    renumbers positions. Returns a (batch, vocab) tensor. (The "blank" mode needs the vision tower and is
    only available while decoding.)
    """
    if mode not in ("masked", "text"):
        raise ValueError(f"prior_logits supports mode 'masked' or 'text', got {mode!r}.")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if position_ids is None:
        position_ids = default_position_ids(model, input_ids, attention_mask, **inputs)
    return masked_prefill(model, input_ids, attention_mask, position_ids, mode).logits
