"""A prompt run once (`Prefix`: its tokens, positions, KV-cache and next-token logits) and texts teacher-forced after
it: what `CaptionScorer` scores captions on.

`conditioned_prefixes` runs a batch of prompts in one forward call and keeps each row's cache without its left
padding; `forced_logprobs` and `teacher_forced` then score texts after a prefix, one row per text over a copy of the
prefix's KV, or packed into one row over a single copy of it (`teacher_forced(..., pack=True)`).

Example:
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> prefix = conditioned_prefixes(model, processor, tiny_inputs(processor, "llava_onevision"))[0]
    >>> logprobs, ids, mask = forced_logprobs(model, prefix, [[5, 9, 7], [11]])
    >>> tuple(logprobs.shape[:2]), mask.tolist()  # one right-padded row per text
    ((2, 3), [[1, 1, 1], [1, 0, 0]])
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .._compat.cache_rows import cache_from_layers, has_recurrent_layers, layer_states, map_slots, map_states
from .._compat.masks import attention_implementation
from .._compat.repairs import indexer_keys
from ..architectures import architecture_for
from ..architectures.layers import check_unpadded, layer_plan
from ..architectures.reported import ExpansionRecord, bind_processor, carried_expansions
from ..decoding.prior import default_position_ids
from ..validation import check_conditioned_logits, check_pixels


class Prefix(NamedTuple):
    """A prompt run once: its tokens, positions, per-layer KV, attended slots and next-token logits."""

    input_ids: torch.Tensor
    positions: torch.Tensor
    layers: list
    attends: torch.Tensor
    first_logits: torch.Tensor
    next_positions: torch.Tensor
    expansions: ExpansionRecord | None = None  # the expansion the prompt's inputs carried (`reported.EXPANSION_KEY`)


def conditioned_prefixes(model, processor, inputs: dict) -> list[Prefix]:
    """The prompts of `inputs` run in one forward call; each row's prefix without its left padding."""
    architecture_for(model).prepare(model)  # again: a pnd.detach(model) since the last call undid it,
    bind_processor(model, processor)  # with the bound processor
    check_pixels(inputs, architecture_for(model).pixel_keys, "CaptionScorer")
    carried = carried_expansions(inputs)  # the expansion the processor's outputs carry, read by the prior's prefill
    positions = default_position_ids(model, **inputs)
    config = model.config.get_text_config(decoder=True)
    cache = cache_from_layers(config, keep_all=True)  # every slot (sliding and chunked layers too): captions reuse it
    attends = inputs["attention_mask"].bool()
    starts = attends.long().argmax(-1).tolist()  # each row's first attended slot: left padding before it is cut
    if any(starts) and has_recurrent_layers(config):
        raise ValueError("These prompts are left-padded, and a recurrent layer's state would take the padding in: "
                         "score them one at a time (score_prompt) on this model.")
    check_unpadded(config, inputs["attention_mask"], "CaptionScorer")
    forward_inputs = {k: v for k, v in inputs.items() if k != "labels"}  # PaliGemma's processor adds them: no loss
    out = model(**forward_inputs, position_ids=positions, past_key_values=cache, use_cache=True, logits_to_keep=1)
    check_conditioned_logits(out.logits, "CaptionScorer")
    states = layer_states(cache)
    prefixes = []
    for row, start in enumerate(starts):
        kept = positions[..., row : row + 1, start:]
        prefixes.append(Prefix(inputs["input_ids"][row : row + 1, start:], kept,
                               [_row_of(state, row, start) for state in states], attends[row : row + 1, start:],
                               out.logits[row : row + 1, -1], next_positions=kept[..., -1:] + 1,
                               expansions=carried))
    return prefixes


def _row_of(state, row: int, start: int):
    """Row `row` of one cache layer's state, its keys and values without the first `start` (padding) slots."""
    return map_states(lambda t: t[row : row + 1], map_slots(lambda t: t[:, :, start:], state))


def teacher_forced(model, prefix: Prefix, chunk: list[list[int]], pack: bool) -> torch.Tensor:
    """Summed log-probabilities of each caption of `chunk` after the prefix; `pack`: packed into one row where the
    model allows it (`CaptionScorer(pack_captions=...)`)."""
    config = model.config.get_text_config(decoder=True)
    if (pack and attention_implementation(config) == "sdpa"
            and getattr(config, "sliding_window", None) is None and layer_plan(config).packs):
        return _teacher_forced_packed(model, prefix, chunk)
    logprobs, ids, mask = forced_logprobs(model, prefix, chunk)
    return (logprobs.gather(2, ids[..., None])[..., 0] * mask).sum(1)


def _teacher_forced_packed(model, prefix: Prefix, chunk: list[list[int]]) -> torch.Tensor:
    """Summed log-probs of the captions of `chunk`, packed one after another into one row after the prefix.

    Each caption token attends to the prefix's attended slots and to the tokens of its own caption up to
    itself, and has the position it has right after the prefix: the same scores as one row per caption,
    with the prefix's KV held once instead of once per caption (SDPA with a boolean 4-D mask). Not for
    recurrent layers, whose state would carry each caption into the next.
    """
    device = prefix.input_ids.device  # the inputs' (the logits': the head's, on a model split over devices)
    lengths = torch.tensor([len(t) for t in chunk], device=device)
    owner = torch.repeat_interleave(torch.arange(len(chunk), device=device), lengths)
    starts = torch.cumsum(lengths, 0) - lengths
    flat = torch.arange(len(owner), device=device)
    steps = flat - starts[owner]  # each token's place in its caption
    ids = torch.tensor([token for t in chunk for token in t], device=device)[None]
    own = (owner[:, None] == owner[None, :]) & (flat[None, :] <= flat[:, None])
    mask = torch.cat([prefix.attends.expand(len(owner), -1), own], 1)[None, None]
    cache = cache_from_layers(model.config.get_text_config(decoder=True), prefix.layers, whole_prompt=True)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=prefix.next_positions + steps,
                   past_key_values=cache, use_cache=True).logits[0].to(device)
    before = torch.cat([prefix.first_logits.to(device), logits], 0)  # row f + 1: the logits after flat token f
    predicting = torch.where(steps == 0, 0, flat)  # the row that predicts each token
    token_logprobs = torch.log_softmax(before[predicting].float(), -1).gather(1, ids[0, :, None])[:, 0]
    return torch.zeros(len(chunk), dtype=torch.float32, device=device).index_add_(0, owner, token_logprobs)


def forced_logprobs(model, prefix: Prefix, chunk: list[list[int]]):
    """(log-probabilities over the vocabulary at each token of each text, (n, longest, vocab); ids; mask):
    one right-padded row per text over a copy of the prefix's KV each."""
    n, longest = len(chunk), max(len(t) for t in chunk)
    device = prefix.input_ids.device  # the inputs' (the logits': the head's, on a model split over devices)
    ids = torch.zeros(n, longest, dtype=torch.long, device=device)
    mask = torch.zeros(n, longest, dtype=torch.long, device=device)
    for i, t in enumerate(chunk):  # right-padded: padding comes after every real token
        ids[i, : len(t)], mask[i, : len(t)] = torch.tensor(t, device=device), 1
    cache = cache_from_layers(model.config.get_text_config(decoder=True),
                              [map_states(lambda t: t.expand(n, *t.shape[1:]), state) for state in prefix.layers],
                              whole_prompt=True)  # the texts are generated tokens (Unlimited-OCR's window)
    steps = torch.arange(longest, device=device)
    positions = (prefix.next_positions + steps).expand(*prefix.next_positions.shape[:-2], n, longest)
    attention_mask = torch.cat([prefix.attends.long().expand(n, -1), mask], 1)
    with indexer_keys(attention_mask):  # slot-anchored indexers (MiniMax-M3) choose among the attended keys
        logits = model(input_ids=ids, attention_mask=attention_mask, position_ids=positions,
                       past_key_values=cache, use_cache=True).logits.to(device)
    logits = torch.cat([prefix.first_logits.to(device).expand(n, 1, -1), logits[:, :-1]], 1).float()
    return torch.log_softmax(logits, -1), ids, mask
