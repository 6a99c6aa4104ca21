"""The brute-force reference's forwards: one from-scratch call of the model per step, without any cache, with the
conditioned pass's position ids and the visual expansion masked out or cut out (docs/design.md §3.2).
"""

import contextlib
import functools
import inspect

import torch

from .expansion import placeholder_positions, visual_positions

PIXEL_KEYS = ("pixel_values", "pixel_values_images", "pixel_values_videos", "image_sizes", "image_grid_thw", "video_grid_thw",
              "image_token_pooling", "image_grids", "image_num_crops", "video_token_pooling", "video_grids",
              "image_grid_hw", "image_merge_sizes", "video_merge_sizes", "video_compression_mask", "target_sizes",
              "target_sizes_videos", "pixel_attention_mask", "spatial_shapes", "pixel_values_local", "num_local_patches",
              "num_frames_per_video", "image_position_ids", "video_position_ids", "batch_num_images",
              "qformer_input_ids", "qformer_attention_mask",  # the Q-Former families: the instruction the queries read
              "pixel_mask", "high_res_pixel_values",  # Aria's padding mask, DeepSeek-VL hybrid's SAM input
              "flattened_patches")  # Kosmos-2.5's patches
# per-token inputs (0 = text): visual blocks that attend bidirectionally (Gemma 3 and 4, Molmo2), MoE routing of visual
# tokens to vision experts (ERNIE 4.5 VL); the prior's kept tokens and the generated tokens are text
TOKEN_TYPES = ("token_type_ids", "mm_token_type_ids", "moe_mm_token_type_ids")
# prefix LMs (PaliGemma): token type 0 is the prompt's bidirectional prefix, so the generated tokens (the causal suffix,
# as its generate's cache makes them) are 1; the prior's prompt keeps the processor's types (its kept tokens stay in
# the prefix)
SUFFIX_TYPE = {"paligemma": 1}

# layer_types where masking is not removal: recurrent layers (Qwen3.5, LFM2, Nemotron-H's Mamba-2, GLM-5-next's KDA)
# and indexed attention (an indexer picks keys before any mask applies: GLM-5-next, Qwen4; MiniMax-M3, whose indexer
# pools keys by position here: `position_binned_indexers`), and Inkling's hybrid layers (short convolutions around an
# attention whose relative bias and window are by distance in the whole sequence here: `slot_distance_biases`)
REMOVED_LAYER_TYPES = ("linear_attention", "conv", "indexed_attention", "minimax_m3_sparse", "hybrid", "hybrid_sliding")


def is_hybrid(model):
    """Whether the prior must run on the kept tokens alone, read from the language model's layer types."""
    layer_types = getattr(model.config.get_text_config(decoder=True), "layer_types", None) or ()
    return any(t in REMOVED_LAYER_TYPES for t in layer_types)

def conditioned_positions(model, input_ids, mask, inputs):
    """Position ids the model gives this sequence: cumsum of the mask, or Qwen2-VL's M-RoPE index (MiniCPM-V 4.7:
    its canvas M-RoPE index)."""
    base = getattr(model, "model", None)  # Nemotron-H Omni has none (1-D positions)
    if hasattr(base, "get_rope_index"):
        accepted = inspect.signature(base.get_rope_index).parameters
        grids = {k: inputs[k] for k in ("image_grid_thw", "video_grid_thw", "target_sizes", "target_sizes_videos")
                 if k in inputs and k in accepted}
        if "mm_token_type_ids" in accepted:
            mm = inputs["mm_token_type_ids"]
            grids["mm_token_type_ids"] = torch.cat([mm, mm.new_zeros(mm.shape[0], input_ids.shape[1] - mm.shape[1])], 1)
        if "second_per_grids" in accepted and "video_second_per_grid" in inputs:  # Qwen3-Omni's time stride
            grids["second_per_grids"] = inputs["video_second_per_grid"]
        positions, _ = base.get_rope_index(input_ids, attention_mask=mask, **grids)
        return positions
    if model.config.model_type in ("kosmos-2", "kosmos-2.5"):  # modeling_kosmos2(_5).py: from its padding id + 1, pads
        # skipped
        return mask.long().cumsum(-1) * mask.long() + model.config.text_config.pad_token_id
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def full_logits(model, inputs, sequence, prior: bool, removed: bool | None = None):
    """Last-position logits of one from-scratch forward over `sequence` (prompt + generated tokens).

    `removed` (the prior only; default: whether the model has recurrent layers): the kept tokens alone, instead of
    the whole sequence with the expansion masked out of attention.
    """
    mask = sequence_mask(inputs, sequence)
    positions = conditioned_positions(model, sequence, mask, inputs)
    if prior:  # the prompt's visual slots (a generated placeholder id is just a token)
        visual = visual_positions(model, inputs["input_ids"])
        mask[:, : visual.shape[1]] *= ~visual
        if is_hybrid(model) if removed is None else removed:
            return kept_tokens_logits(model, sequence, mask.bool(), positions)
    pixels = {k: inputs[k] for k in PIXEL_KEYS if k in inputs}
    suffix = SUFFIX_TYPE.get(model.config.model_type)
    for key in TOKEN_TYPES:  # the processor's for the conditioned pass, text (0) for generated tokens and the prior
        if key in inputs:
            types = inputs[key] if suffix is not None else inputs[key] * (not prior)
            generated = types.new_full((types.shape[0], sequence.shape[1] - types.shape[1]), suffix or 0)
            pixels[key] = torch.cat([types, generated], 1)
    if "image_embeds_position_mask" in inputs:  # Kosmos-2: the slots its image features fill (masked for the prior)
        slots = inputs["image_embeds_position_mask"]
        pixels["image_embeds_position_mask"] = torch.cat([slots, slots.new_zeros(slots.shape[0], sequence.shape[1] -
                                                                                 slots.shape[1])], 1)
    out = model_forward(model, sequence, inputs["input_ids"].shape[1], attention_mask=mask, position_ids=positions,
                        use_cache=False, **pixels)
    return out.logits[:, -1].float()


def model_forward(model, sequence, prompt_length, **inputs):
    """`model(input_ids=sequence, **inputs)`; for the Q-Former families (BLIP-2, InstructBLIP, InstructBLIP-Video),
    whose forward passes position ids on to the Q-Former as well, what their `generate` does: the projected query
    outputs scattered into the prompt's placeholder embeddings, then the language model on those embeddings.
    Unlimited-OCR's attention is written out for the sequence (`window_masks`)."""
    if inputs.get("attention_mask") is not None:
        inputs["attention_mask"] = window_masks(model, inputs["attention_mask"], prompt_length)
    if not hasattr(model, "query_tokens"):
        return model(input_ids=sequence, **inputs)
    features = getattr(model, "get_video_features", None) or model.get_image_features
    qformer = {k: inputs.pop(k) for k in ("qformer_input_ids", "qformer_attention_mask") if k in inputs}
    queries = features(inputs.pop("pixel_values"), **qformer).pooler_output
    slots = torch.zeros_like(sequence, dtype=torch.bool)
    slots[:, :prompt_length] = placeholder_positions(model, sequence[:, :prompt_length])  # generated ones are tokens
    embeds = model.get_input_embeddings()(sequence).masked_scatter(slots[..., None], queries)
    return model.language_model(inputs_embeds=embeds, **inputs)


def text_dtype(model):
    """The dtype the language model computes in (its token embeddings'): its attention masks' (a vision tower in
    another dtype leads `model.dtype`)."""
    return model.get_input_embeddings().weight.dtype


def additive_mask(allowed, dtype):
    """An additive attention mask: 0 where `allowed`, the dtype's minimum elsewhere (on `allowed`'s device)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def window_masks(model, mask, prompt_length):
    """The 2-D `mask`, or for a model with reference sliding-window attention (Unlimited-OCR), {layer type: additive
    4-D mask} written out: every token sees the attended slots before it (full attention), and in R-SWA layers only the
    prompt's and those of the last `sliding_window` tokens after the prompt, itself included
    (modeling_unlimited_ocr.py: its cache keeps the prompt, a window of the generated tokens)."""
    config = model.config.get_text_config(decoder=True)
    if "reference_sliding_attention" not in (getattr(config, "layer_types", None) or ()):
        return mask
    slots = torch.arange(mask.shape[1], device=mask.device)
    query, key = slots[:, None], slots[None, :]
    causal = (key <= query)[None] & mask.bool()[:, None, :]
    window = causal & ((key < prompt_length) | (query - key < config.sliding_window))
    return {name: additive_mask(seen, text_dtype(model))[:, None]
            for name, seen in (("full_attention", causal), ("reference_sliding_attention", window))}


def sequence_mask(inputs, sequence):
    """The attention mask of `sequence`: the prompt's, then 1 for every generated token."""
    prompt_mask = inputs["attention_mask"]
    return torch.cat([prompt_mask, prompt_mask.new_ones(sequence.shape[0], sequence.shape[1] - prompt_mask.shape[1])], 1)


@torch.no_grad()
def kept_tokens_logits(model, sequence, kept, positions, prompt_length: int | None = None):
    """Last logits of `kept_tokens_forward`."""
    return kept_tokens_forward(model, sequence, kept, positions, prompt_length=prompt_length)[0].logits[:, -1].float()


def kept_tokens_forward(model, sequence, kept, positions, prompt_length: int | None = None, **kwargs):
    """A forward on each row's `kept` tokens alone, left-padded, at their `positions` (batch, L) or (rows, batch, L);
    the attention mask is explicit (non-contiguous positions, docs/design.md §7). Returns the model's output and
    the (batch, width) mask of the kept tokens in that compacted batch. `prompt_length`, for a prefix LM
    (`SUFFIX_TYPE`): the tokens after it are the answer, causal (its token type), the prompt's attend both ways."""
    width = int(kept.sum(1).max())
    ids = sequence.new_full((sequence.shape[0], width), model.generation_config.pad_token_id)
    mask = torch.zeros_like(ids)
    compact = positions.new_zeros(*positions.shape[:-1], width)
    slots = torch.zeros_like(ids)  # each kept token's slot in `sequence`
    for row in range(sequence.shape[0]):
        n = int(kept[row].sum())
        ids[row, width - n :], mask[row, width - n :] = sequence[row, kept[row]], 1
        compact[..., row, width - n :] = positions[..., row, kept[row]]
        slots[row, width - n :] = kept[row].nonzero().flatten()
    suffix = SUFFIX_TYPE.get(model.config.model_type)
    if suffix is not None and prompt_length is not None:
        kwargs["token_type_ids"] = (slots >= prompt_length).long() * suffix * mask
    with position_binned_indexers(model, compact, mask.bool()), slot_distance_biases(model, slots):
        out = model(input_ids=ids, attention_mask=_window_masks(model, mask, slots), position_ids=compact,
                    **{"use_cache": False, **kwargs})
    return out, mask.bool()


@contextlib.contextmanager
def position_binned_indexers(model, positions, valid):
    """MiniMax-M3's sparse layers for a cache-free forward on the kept tokens alone (keys = the call's tokens, at
    `positions` (batch, S), `valid` (batch, S) the non-padding ones), as its indexer's TODO describes them for a
    content-relative run: key blocks are bins of positions (`position // block_size`), not runs of slots; only valid
    keys at or before the query's position are scored; each block's score is its best key's, the query's own and
    `index_local_blocks - 1` blocks before it always kept, and the top `index_topk_blocks` blocks chosen. Attention
    then sees the valid, causal keys of the chosen blocks. Written from the indexer's description, not from pnd."""
    indexers = [m for m in model.modules() if type(m).__name__ == "MiniMaxM3VLIndexer"]
    if not indexers:
        yield
        return
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import apply_rotary_pos_emb

    seen = valid[:, None, :] & (positions[:, None, :] <= positions[:, :, None])  # (batch, queries, keys)

    def select(indexer, hidden_states, position_embeddings, past_key_values, position_ids):
        assert torch.equal(position_ids, positions)
        batch, length, _ = hidden_states.shape
        q = indexer.q_norm(indexer.q_proj(hidden_states).view(batch, length, -1, indexer.head_dim)).transpose(1, 2)
        k = indexer.k_norm(indexer.k_proj(hidden_states).view(batch, length, 1, indexer.head_dim)).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos[..., : indexer.head_dim], sin[..., : indexer.head_dim])
        if past_key_values is not None:  # a fresh cache (tests compare its indexer keys): this call's keys only
            assert past_key_values.layers[indexer.layer_idx].update_index(k).shape[2] == length
        scores = (q.float() @ k.float().transpose(-1, -2)).masked_fill(~seen[:, None], -torch.inf)
        blocks = int(positions.max()) // indexer.block_size + 1
        bins = (positions // indexer.block_size)[:, None, None, :].expand_as(scores)
        pooled = scores.new_full((*scores.shape[:-1], blocks), -torch.inf).scatter_reduce(-1, bins, scores, "amax")
        own = positions // indexer.block_size
        for back in range(indexer.local_blocks):
            local = (own - back).clamp(min=0)[:, None, :, None].expand(-1, pooled.shape[1], -1, 1)
            pooled.scatter_(-1, local, torch.inf)
        best, chosen = pooled.topk(min(indexer.topk_blocks, blocks), dim=-1)
        return chosen.masked_fill(best == -torch.inf, -1)

    def block_mask(indexer, chosen, attention_mask, key_length, dtype, device, position_ids):
        blocks = int(positions.max()) // indexer.block_size + 1
        picked = torch.zeros(*chosen.shape[:-1], blocks + 1, dtype=torch.bool, device=chosen.device)
        picked.scatter_(-1, chosen.masked_fill(chosen < 0, blocks), True)
        bins = (positions // indexer.block_size)[:, None, None, :].expand(*chosen.shape[:-1], -1)
        keep = picked.gather(-1, bins) & seen[:, None]  # (batch, indexer heads, queries, keys)
        keep = keep.repeat_interleave(model.config.get_text_config(decoder=True).num_attention_heads // keep.shape[1], 1)
        return additive_mask(keep, dtype)

    before = [dict(vars(indexer)) for indexer in indexers]  # pnd's own forward, where pnd.attach put one
    for indexer in indexers:
        indexer.forward = functools.partial(select, indexer)
        indexer.build_block_mask = functools.partial(block_mask, indexer)
    try:
        yield
    finally:
        for indexer, attributes in zip(indexers, before):
            for name in ("forward", "build_block_mask"):
                vars(indexer).pop(name)
                if name in attributes:
                    setattr(indexer, name, attributes[name])


@contextlib.contextmanager
def slot_distance_biases(model, slots):
    """Inkling's relative position biases for a cache-free forward on the kept tokens alone: by each pair's distance in
    slots of the whole sequence (`slots` (batch, S): each kept token's), as the masked forward over the whole sequence
    gives them, not by the distance in the compacted batch. The bias is `relative_states @ proj` read at the backward
    distance, zero outside [0, rel_extent). Written from `Inkling2RelativeLogits`' description, not from pnd."""
    biases = [m for m in model.modules() if type(m).__name__ in ("InklingRelativeLogits", "Inkling2RelativeLogits")]
    if not biases:
        yield
        return
    behind = (slots[:, :, None] - slots[:, None, :])[:, None]  # (batch, 1, queries, keys)

    def forward(bias, relative_states, query_positions, key_positions):
        profiles = torch.einsum("bqhd,de->bhqe", relative_states, bias.proj)  # (batch, heads, queries, extent)
        reach = behind.expand(-1, profiles.shape[1], -1, -1)
        read = profiles.gather(-1, reach.clamp(0, bias.rel_extent - 1))
        return torch.where((reach >= 0) & (reach < bias.rel_extent), read, torch.zeros_like(read))

    before = [vars(bias).get("forward") for bias in biases]  # pnd's own forward, where pnd.attach put one
    for bias in biases:
        bias.forward = functools.partial(forward, bias)
    try:
        yield
    finally:
        for bias, forward_before in zip(biases, before):
            vars(bias).pop("forward")
            if forward_before is not None:
                bias.forward = forward_before


def _window_masks(model, mask, slots):
    """The attention mask of a kept-tokens forward: `mask` (2-D), except on a model with sliding-window attention
    layers, whose window stays over the slots of the whole sequence (the removed span counts, as in the masked
    forward of an attention-only model): per layer type, 4-D additive masks for attention layers, `mask` for recurrent
    ones."""
    config = model.config.get_text_config(decoder=True)
    types = getattr(config, "layer_types", None) or ()
    if "hybrid_sliding" in types:  # Inkling: its layers read the masks of these three names
        types = ("full_attention", "sliding_attention", "linear_attention")
    if "sliding_attention" not in types:
        return mask
    behind = slots[:, :, None] - slots[:, None, :]  # (batch, queries, keys) in slots of the whole sequence
    allowed = mask.bool()[:, None, :] & (behind >= 0)
    allowed |= torch.eye(mask.shape[1], dtype=torch.bool, device=mask.device)  # a padding query sees itself
    full = additive_mask(allowed, text_dtype(model))[:, None]
    per_type = {"full_attention": full, "indexed_attention": full,  # dots3's sparse layers
                "sliding_attention": additive_mask(allowed & (behind < config.sliding_window), text_dtype(model))[:, None]}
    return {kind: per_type.get(kind, mask) for kind in set(types)}  # recurrent layers: the 2-D padding mask


def placeholders_only_removed(model, inputs, sequence):
    """A leaky prior, for tests that show it decodes other tokens: the kept-tokens forward with only the placeholders
    cut out (timestamps, labels and delimiters stay)."""
    mask = sequence_mask(inputs, sequence)
    kept = mask.bool()
    kept[:, : inputs["input_ids"].shape[1]] &= ~placeholder_positions(model, inputs["input_ids"])
    return kept_tokens_logits(model, sequence, kept, conditioned_positions(model, sequence, mask, inputs))
