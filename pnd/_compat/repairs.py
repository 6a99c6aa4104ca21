"""Family repairs (transformers 5.23): methods of a family that pnd repairs (Nemotron-H Omni's video features,
Kosmos-2's 4-D masks) or patches on the instance (MiniMax-M3's indexers), the per-call context the patches read
(`indexer_keys`, `kept_positions`), and a processor's private state pnd reads (HyperCLOVA X's video durations).

Example:
    >>> given_kept_positions() is None  # outside a `kept_positions` context
    True
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from contextvars import ContextVar

import torch


def _video_features_as_tuple(model, pixel_values_videos, **kwargs):  # generate passes what this signature names
    outputs = type(model).get_video_features(model, pixel_values_videos, **kwargs)
    outputs.pooler_output = tuple(outputs.pooler_output)
    return outputs


def repair_video_features(model) -> None:
    """Make `model.get_video_features` return its pooled features as a tuple (idempotent).

    transformers 5.23's Nemotron-H Omni `forward` does `torch.cat(video_outputs.pooler_output)` on the one tensor
    that its `get_video_features` returns, so every call with a video fails, plain `generate` included. The repair is
    an instance attribute (a `functools.partial`, so the model still copies and pickles); a fixed release returns a
    tuple already, which the repair leaves as it is.
    """
    if "get_video_features" not in vars(model):
        model.get_video_features = functools.partial(_video_features_as_tuple, model)


_INDEXER_KEYS: ContextVar[torch.Tensor] = ContextVar("pnd_indexer_keys")  # (rows, slots) 0/1: the keys an indexer
# may choose among in this thread's forward; unset: the model's own indexer


@contextmanager
def indexer_keys(keys: torch.Tensor):
    """Within this context (this thread's), MiniMax-M3's indexers (once `mask_indexer_keys` was called on the model)
    choose among the keys that `keys` (rows, slots: the forward's 2D attention mask) marks, as its attention sees
    them; outside it, and in code torch.compile traces, they run as transformers wrote them."""
    token = _INDEXER_KEYS.set(keys)  # read as bool by the patched indexers only: nothing per step for other models
    try:
        yield
    finally:
        _INDEXER_KEYS.reset(token)


_KEPT_POSITIONS: ContextVar[tuple] = ContextVar("pnd_kept_positions")  # (queries, keys) position ids (rows, tokens)
# of this thread's language-model call on the prior's kept tokens side by side; unset: slots count as positions


@contextmanager
def kept_positions(queries: torch.Tensor, keys: torch.Tensor):
    """Within this context (this thread's), the language-model call runs the prior's kept tokens side by side: its
    queries are at position ids `queries` (rows, tokens), its keys (cached ones, then the call's) at `keys`. A layer
    that reads distances from cache slots (Inkling's relative position bias, once `pnd.architectures.inkling` patched
    it) reads them from these instead; outside it, and in code torch.compile traces, layers run as transformers wrote
    them."""
    token = _KEPT_POSITIONS.set((queries, keys))
    try:
        yield
    finally:
        _KEPT_POSITIONS.reset(token)


def given_kept_positions() -> tuple | None:
    """The (queries, keys) position ids `kept_positions` gives this thread's call, or None."""
    return None if torch.compiler.is_compiling() else _KEPT_POSITIONS.get(None)


def _indexers(model) -> list:
    return [module for module in model.modules() if type(module).__name__ == "MiniMaxM3VLIndexer"]


def mask_indexer_keys(model) -> None:
    """Make each MiniMax-M3 indexer of `model` honour `indexer_keys` (idempotent; `unmask_indexer_keys` undoes it).

    transformers' `MiniMaxM3VLIndexer.forward` scores every cache slot up to the query's position: a masked slot's key
    (a visual token the prior hides) would still win a block of the top-k. Its forward is repeated here with one change,
    the scores of keys outside `indexer_keys` set to -inf before the blocks are pooled (the TODO of transformers 5.23's
    indexer, step 3). An instance attribute, so other models and plain calls are untouched.
    """
    for indexer in _indexers(model):
        if "forward" not in vars(indexer):
            indexer.forward = functools.partial(_masked_indexer_forward, indexer)


def unmask_indexer_keys(model) -> None:
    """Undo `mask_indexer_keys`."""
    for indexer in _indexers(model):
        vars(indexer).pop("forward", None)


def _masked_indexer_forward(indexer, hidden_states, position_embeddings, past_key_values, position_ids):
    """`MiniMaxM3VLIndexer.forward` (transformers 5.23), its scores restricted to `indexer_keys`."""
    keys = None if torch.compiler.is_compiling() else _INDEXER_KEYS.get(None)
    if keys is None:
        return type(indexer).forward(indexer, hidden_states, position_embeddings, past_key_values, position_ids)
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import apply_rotary_pos_emb

    batch, q_len, _ = hidden_states.shape
    idx_q = indexer.q_norm(indexer.q_proj(hidden_states).view(batch, q_len, -1, indexer.head_dim)).transpose(1, 2)
    idx_k = indexer.k_norm(indexer.k_proj(hidden_states).view(batch, q_len, 1, indexer.head_dim)).transpose(1, 2)
    cos, sin = position_embeddings
    idx_q, idx_k = apply_rotary_pos_emb(idx_q, idx_k, cos[..., : indexer.head_dim], sin[..., : indexer.head_dim])
    if past_key_values is not None:
        idx_k = past_key_values.layers[indexer.layer_idx].update_index(idx_k)
    k_len = idx_k.shape[2]
    if keys.shape != (batch, k_len):
        raise RuntimeError(f"pnd: the indexer's key mask has shape {tuple(keys.shape)}, its keys {(batch, k_len)}.")
    num_key_blocks = -(-k_len // indexer.block_size)
    pad = num_key_blocks * indexer.block_size - k_len
    scores = torch.matmul(idx_q.float(), idx_k.float().transpose(-1, -2))
    k_positions = torch.arange(k_len, device=idx_q.device)
    token_future = k_positions[None, None, None, :] > position_ids[:, None, :, None]
    hidden = ~keys.to(idx_q.device, torch.bool)[:, None, None, :]  # the one change: keys the attention does not see
    scores = scores.masked_fill(token_future | hidden, float("-inf"))
    if pad:
        scores = torch.nn.functional.pad(scores, (0, pad), value=float("-inf"))
    block_scores = scores.view(batch, indexer.num_heads, q_len, num_key_blocks, indexer.block_size).amax(dim=-1)
    q_block = position_ids // indexer.block_size
    if indexer.local_blocks > 0:
        local = torch.arange(indexer.local_blocks, device=idx_q.device)
        local_idx = (q_block[..., None] - local.view(1, 1, -1)).clamp(min=0)
        local_idx = local_idx.unsqueeze(1).expand(-1, indexer.num_heads, -1, -1)
        block_scores.scatter_(-1, local_idx, float("inf"))
    topk_scores, topk_indices = block_scores.topk(min(indexer.topk_blocks, num_key_blocks), dim=-1)
    return topk_indices.masked_fill(topk_scores == float("-inf"), -1)


def accept_4d_masks(decoder, undo: bool = False) -> None:
    """Make Kosmos-2's text decoder take a 4-D attention mask (boolean, True attending, or additive) as given, as other
    decoders do (idempotent; `undo=True` restores it). transformers 5.23's `_prepare_decoder_attention_mask` takes 2-D
    masks only, and `CaptionScorer` packs captions after a prompt with a 4-D one.

    Example:
        >>> from pnd.testing import tiny_model
        >>> decoder = tiny_model("kosmos-2")[0].text_model.model
        >>> accept_4d_masks(decoder); accept_4d_masks(decoder, undo=True)
    """
    name = "_prepare_decoder_attention_mask"
    if undo or name in vars(decoder):
        if undo:
            vars(decoder).pop(name, None)
        return
    prepare_mask = getattr(decoder, name)

    @functools.wraps(prepare_mask)
    def repaired(attention_mask, input_shape, inputs_embeds, past_key_values_length):
        if attention_mask is None or attention_mask.ndim != 4:
            return prepare_mask(attention_mask, input_shape, inputs_embeds, past_key_values_length)
        if attention_mask.dtype != torch.bool:
            return attention_mask.to(inputs_embeds.dtype)
        blocked = torch.finfo(inputs_embeds.dtype).min
        return torch.zeros(attention_mask.shape, dtype=inputs_embeds.dtype,
                           device=inputs_embeds.device).masked_fill(~attention_mask, blocked)

    setattr(decoder, name, repaired)


def pending_video_durations(processor) -> list:
    """The durations HyperCLOVA X Vision V2's processor will write for the `<|video_duration|>` tokens of the text it
    expands next (transformers 5.23 keeps them on a private attribute)."""
    return list(processor._pending_video_durations)
