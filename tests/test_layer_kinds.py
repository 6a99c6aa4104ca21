"""docs/design.md §1, §4: what the prior does in each layer type is declared in one table (`pnd/architectures/layers.py`); an
undeclared layer type is refused by name; the new kinds (recurrent layers with several states, indexed sparse
attention) are exact, and each fails the reference when it is handled as the masked-only layers are.

Qwen4 (exp) mixes Gated DeltaNet (three states per layer with its n-gram embeddings) and indexed attention, GLM-5-next
KDA and indexed MLA, Nemotron-H Omni Mamba-2 and attention: each is checked against the from-scratch reference in
`test_exactness.py` like every family; here, that each new kind fails it when handled wrongly (Mamba-2's masked-only
prior: `test_hybrid.py::test_decoding_fails_with_a_leaky_prior`). Mistral Large 4's and dots3's per-key indexers are
the exception that masking is removal there (shown against GLM-5-next's pooled indexer).
"""

import dataclasses

import pytest
import torch

import pnd
from pnd._compat.cache_rows import IndexedState, cache_from_layers, layer_states, map_states, set_layer_state
from pnd.architectures.layers import LAYER_KINDS, LayerKind, layer_plan
from pnd.decoding import prior
from pnd.decoding.cache import PairedCache
from pnd.io.prompts import video_prompt
from pnd.testing import TINY_ARCHITECTURES, random_video
from pnd.testing.reference import conditioned_positions, forced_scores, greedy, kept_tokens_forward, visual_positions

from helpers import DEVICE, PROMPTS, language_model_calls, on_device, tiny_inputs, tiny_model

STEPS = 6


@pytest.mark.parametrize("model_type", TINY_ARCHITECTURES)
def test_every_tiny_family_layer_type_is_declared(model_type):
    config = tiny_model(model_type)[0].config.get_text_config(decoder=True)
    assert all(kind.refused is None for kind in layer_plan(config).kinds)


def test_an_unknown_layer_type_is_refused_with_its_name():
    model, processor = tiny_model("qwen3_5")
    config = model.config.get_text_config(decoder=True)
    config.layer_types = [config.layer_types[0], "quantum_attention", *config.layer_types[2:]]  # a future layer type
    refusal = r"layer type 'quantum_attention' \(layer 1 of qwen3_5_text\): pnd has no rule"
    with pytest.raises(ValueError, match=refusal):
        pnd.attach(model, processor)


def test_a_refused_layer_kind_says_why(monkeypatch):
    config = tiny_model("qwen3_5")[0].config.get_text_config(decoder=True)
    refused = LayerKind(prior="mask", state="kv", refused="its keys are qubits")
    monkeypatch.setitem(LAYER_KINDS, "quantum_attention", refused)
    config.layer_types = [config.layer_types[0], "quantum_attention", *config.layer_types[2:]]
    with pytest.raises(ValueError, match=r"'quantum_attention' \(layer 1 of qwen3_5_text\): its keys are qubits"):
        layer_plan(config)


def test_reference_sliding_attention_rows_carry_the_prompt_and_the_window():
    """Unlimited-OCR's R-SWA cache layer keeps the prompt's keys apart from a window of the generated tokens' ones:
    pnd's row operations join them (`layer_states`), split them back (`set_layer_state`: a row selection keeps both
    parts), and a cache rebuilt from them (`cache_from_layers` + `copy_prompt_length`) continues decoding as the
    original does. Without the join, the rows would hold the window alone."""
    from pnd._compat.cache_rows import copy_prompt_length

    model, processor = tiny_model("unlimited_ocr")
    inputs = tiny_inputs(processor, "unlimited_ocr", PROMPTS[1:], image=True)
    config = model.config.get_text_config(decoder=True)
    out = model.generate(**inputs, max_new_tokens=5, do_sample=False, return_dict_in_generate=True)
    cache, length = out.past_key_values, inputs["input_ids"].shape[1]
    layer = cache.layers[0]
    assert layer.prefill_keys.shape[2] == length and 0 < layer.keys.shape[2] < 5  # the window slid
    keys, values = layer_states(cache)[0]
    assert torch.equal(keys, torch.cat([layer.prefill_keys, layer.keys], 2))
    set_layer_state(layer, map_states(lambda t: t[[0]], (keys, values)))
    assert torch.equal(layer.prefill_keys, keys[:, :, :length]) and torch.equal(layer.keys, keys[:, :, length:])
    rebuilt = cache_from_layers(config, layer_states(cache))
    copy_prompt_length(cache, rebuilt)
    step = dict(input_ids=out.sequences[:, -1:], attention_mask=torch.ones_like(out.sequences), use_cache=True)
    with torch.no_grad():
        want = model(**step, past_key_values=cache).logits
        got = model(**step, past_key_values=rebuilt).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("repaired", [True, False])
def test_reference_sliding_attention_mask_is_repaired_in_pnds_steps(monkeypatch, repaired):
    """transformers reads R-SWA's 2-D attention mask at (cache index + the window's offset), the prompt's keys
    included: once the window of generated tokens slides, a masked prompt slot applies to another slot, so a
    left-padded prompt decodes otherwise than itself alone in plain transformers (the padding moves onto text), as the
    prior's hidden visual slots would. pnd's paired steps read the mask at the prompt's slots
    (`pnd/architectures/unlimited_ocr.py`): there the padded row scores as the prompt alone at every step; without
    the repair it does not."""
    from pnd._compat import masks

    model, processor = tiny_model("unlimited_ocr")
    batch = tiny_inputs(processor, "unlimited_ocr", PROMPTS, image=True)
    alone = tiny_inputs(processor, "unlimited_ocr", PROMPTS[:1], image=True)
    assert not batch["attention_mask"][0].all()
    kwargs = dict(max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, output_scores=True,
                  return_dict_in_generate=True)
    window = model.config.get_text_config(decoder=True).sliding_window

    def gaps(padded, single):
        return [float((p[0] - s[0])[torch.isfinite(s[0])].abs().max()) for p, s in zip(padded, single)]

    plain = gaps(model.generate(**batch, **kwargs).scores, model.generate(**alone, **kwargs).scores)
    assert max(plain[:window + 1]) < 1e-4 < max(plain[window + 1 :]), plain  # equal until the window slides
    if not repaired:
        monkeypatch.setattr(masks, "shifted_window_mask", lambda mask, prompt, offset: mask)
    pnd.attach(model, processor)
    kwargs["logits_processor"] = [pnd.PriorNormalized(0.7)]
    paired = gaps(model.generate(**batch, **kwargs).scores, model.generate(**alone, **kwargs).scores)
    assert (max(paired) < 1e-4) == repaired, paired


def _normalized_greedy(model, processor, inputs):
    return pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, output_scores=True,
        return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.7)])


def test_glm5_next_indexed_layers_fail_with_the_prior_in_the_prompts_slots(monkeypatch):
    """The masked-not-removed mistake in an indexed layer: the prior rows left in the conditioned prompt's slots (visual
    slots masked) make GLM-5-next's indexer group masked slots into its key pools, so the prior attends other keys
    than on the kept tokens alone, and the scores leave the reference's."""
    model, processor = tiny_model("glm5_next")
    inputs = tiny_inputs(processor, "glm5_next", PROMPTS)
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    out = _normalized_greedy(model, processor, inputs)
    assert torch.equal(out.sequences[:, -STEPS:], tokens)
    masked = dataclasses.replace(LAYER_KINDS["indexed_attention"], prior="mask", compact=False)
    monkeypatch.setitem(LAYER_KINDS, "indexed_attention", masked)
    out = _normalized_greedy(model, processor, inputs)
    gap = max(float((got - want)[torch.isfinite(got)].abs().max()) for got, want in zip(out.scores, scores))
    assert not torch.equal(out.sequences[:, -STEPS:], tokens) or gap > 0.05


# Llama 4: chunked-attention RoPE layers (chunks of 16 slots) around a NoPE full-attention layer. The prior keeps every
# kept token in its conditioned slot, so in its conditioned chunk (docs/design.md §1); the reference masks the visual
# slots of the whole sequence, whose chunks are then the conditioned sequence's.
def _llama4_temperature(model, floor_scale: int):
    """Make the NoPE layers' query temperature, log1p(floor((slot + 1) / floor_scale)) * attn_scale + 1, vary inside
    the tiny prompts (transformers' floor_scale, 8192, leaves it 1 below 8191 slots)."""
    for layer in model.language_model.model.layers:
        layer.self_attn.floor_scale = floor_scale


@pytest.mark.parametrize("floor_scale", [8192, 4])
def test_llama4_chunks_fail_when_the_prior_is_compacted(monkeypatch, floor_scale):
    """The prior run on the kept tokens side by side (a compacted prefill: the kept tokens after the image move into
    other chunks of slots) leaves the reference, which keeps the chunks of the conditioned sequence; so does it with a
    NoPE temperature that counts slots (floor_scale 4)."""
    model, processor = tiny_model("llama4")
    _llama4_temperature(model, floor_scale)
    inputs = tiny_inputs(processor, "llama4", PROMPTS)
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    out = _normalized_greedy(model, processor, inputs)
    assert torch.equal(out.sequences[:, -STEPS:], tokens)
    compacted = LayerKind(prior="kept", state="kv", compact=True, packs=False, static=False)
    monkeypatch.setitem(LAYER_KINDS, "chunked_attention", compacted)
    # the compacted prefill's chunked layers keep every slot, as its layout needs (else it crashes before decoding)
    monkeypatch.setattr(prior, "cache_from_layers", lambda config, layers=None, keep_all=False:
                        cache_from_layers(config, layers, keep_all=True))
    out = _normalized_greedy(model, processor, inputs)
    gap = max(float((got - want)[torch.isfinite(got)].abs().max()) for got, want in zip(out.scores, scores))
    assert not torch.equal(out.sequences[:, -STEPS:], tokens) or gap > 0.05


def test_llama4_padded_rows_follow_transformers_own_padded_rows():
    """With a NoPE temperature that counts slots (floor_scale 4), transformers' own Llama 4 gives a left-padded row
    other logits than the prompt alone (the padding's slots count): there pnd's padded batch equals the reference on
    the same padded batch, as plain generate does, and not each prompt alone (`test_exactness.py`'s padded-batch test
    holds at the real floor_scale, 8192, which the tiny prompts stay far below)."""
    model, processor = tiny_model("llama4")
    _llama4_temperature(model, 4)
    batch = tiny_inputs(processor, "llama4", PROMPTS)
    row = int((batch["attention_mask"] == 0).any(-1).nonzero()[0, 0])
    alone = tiny_inputs(processor, "llama4", PROMPTS[row : row + 1], seed=row)
    assert alone["input_ids"].shape[1] < batch["input_ids"].shape[1]
    with torch.no_grad():
        padded_logits = model(**batch).logits[row, -1]
        alone_logits = model(**alone).logits[0, -1]
    assert not torch.allclose(padded_logits, alone_logits, atol=1e-3)  # transformers' own padded row differs
    tokens, _ = greedy(model, batch, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    assert torch.equal(_normalized_greedy(model, processor, batch).sequences[:, -STEPS:], tokens)


def test_llama4_text_prior_is_refused():
    """prior='text' renumbers the kept tokens' positions, which the prompt's slots (the chunks) would no longer match."""
    model, processor = tiny_model("llama4")
    with pytest.raises(ValueError, match=r"prior='text' is not supported on llama4_text \(its layers read slots"):
        pnd.prior_logits(model, **tiny_inputs(processor, "llama4"), mode="text")


def _stale_prior_rows(monkeypatch, types: list, layer_type: str):
    """Beam reordering that leaves the prior rows of the layers whose type (in `types`) is `layer_type` as they were
    (the stale-prior bug)."""
    reorder = PairedCache.reorder_cache

    def stale(self, beam_idx):
        before, n = layer_states(self), self.prior_attends.shape[0] if self.is_paired else 0
        reorder(self, beam_idx)
        for layer, kind, old, new in zip(self.layers, types, before, layer_states(self)):
            if n and kind == layer_type:
                set_layer_state(layer, map_states(lambda now, then: torch.cat([now[:n], then[n:]]), new, old))

    monkeypatch.setattr(PairedCache, "reorder_cache", stale)


@pytest.mark.parametrize("model_type, layer_type, image", [
    ("qwen4_exp", "linear_attention", False), ("qwen4_exp", "indexed_attention", False),
    # on images: their video + beam search crash in transformers itself
    ("glm5_next", "linear_attention", True), ("glm5_next", "indexed_attention", True),  # KDA, indexed MLA
    ("nemotron_h_omni", "linear_attention", True),  # Mamba-2
    ("mistral_large4", "indexed_attention", True), ("dots3_note", "indexed_attention", False),  # per-key indexers
    ("inkling2", "hybrid", True), ("inkling2", "hybrid_sliding", True),  # convolutions and attention in one layer
    ("inkling_mm_model", "hybrid", True),
])
def test_beam_search_fails_when_a_layer_kind_keeps_stale_prior_rows(monkeypatch, model_type, layer_type, image):
    """Beam search reorders the prior rows of every layer kind (Gated DeltaNet's three states, KDA's and Mamba-2's
    convolution and recurrent states; the indexed layers' keys, values, indexer keys and positions; Inkling's keys,
    values and convolution states in one layer): leaving one kind's prior rows unreordered changes the beams."""
    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1], image=image)
    kwargs = dict(max_new_tokens=STEPS, num_beams=3, do_sample=False, output_scores=True, return_dict_in_generate=True,
                  logits_processor=[pnd.PriorNormalized(1.0)])
    right = pnd.attach(model, processor).generate(**inputs, **kwargs)
    _stale_prior_rows(monkeypatch, model.config.get_text_config(decoder=True).layer_types, layer_type)
    wrong = model.generate(**inputs, **kwargs)
    assert not torch.equal(right.sequences, wrong.sequences) or not torch.allclose(
        right.sequences_scores, wrong.sequences_scores, atol=1e-3)


# MiniMax-M3-VL: block-sparse layers (an indexer picks blocks of 4 slots, 2 per query, its own among them) on both sides
# of a full-attention layer. Its indexer pools keys into blocks of slots and places the query's block by its position
# id, so the prior stays in the prompt's slots (= positions) with the visual keys hidden from attention and from the
# indexer; the reference (`reference.position_binned_indexers`) runs the kept tokens alone, compacted, with key blocks
# binned by position. transformers' layer differs under left padding, so the batches here are of same-length prompts.
MINIMAX_PROMPTS = ("Describe the video.", "what colour is the shape?")  # the same length: an unpadded batch


def _minimax_inputs(processor, prompts=MINIMAX_PROMPTS, image=False, seed=0):
    """Processor outputs for one video (with timestamps: `]<]0.0 seconds[>[`) or image per prompt."""
    texts = [video_prompt(processor, prompt, "image" if image else "video") for prompt in prompts]
    visuals = [random_video(seed + i) for i in range(len(prompts))]
    if image:
        return on_device(processor(text=texts, images=[[v[0]] for v in visuals], return_tensors="pt", padding=True))
    metadata = [{"fps": 2, "total_num_frames": 4, "frames_indices": [0, 1, 2, 3]}] * len(prompts)
    return on_device(processor(text=texts, videos=visuals, video_metadata=metadata, return_tensors="pt", padding=True))


@pytest.fixture
def minimax(tiny):
    return tiny("minimax_m3_vl")


def _eos(model):
    return [model.generation_config.eos_token_id]


@pytest.mark.parametrize("image", [False, True])
def test_minimax_greedy_matches_the_kept_tokens_reference(minimax, image):
    """A batch of two prompts: the tokens and scores of the reference, whose prior runs the kept tokens alone with
    position-binned key blocks. The indexer keeps fewer keys than the prompt has, and the visual span covers whole
    blocks (video) or shares one with text (image). alpha=0 is plain generate."""
    model, processor = minimax
    inputs = _minimax_inputs(processor, image=image)
    config = model.config.get_text_config(decoder=True)
    assert config.index_topk_blocks * config.index_block_size < inputs["input_ids"].shape[1] // 2
    assert config.layer_types == ["minimax_m3_sparse", "full_attention", "minimax_m3_sparse"]
    assert inputs["attention_mask"].all()
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=_eos(model))
    out = _normalized_greedy(model, processor, inputs)
    # still "sdpa": MiniMax-M3 builds its sparse layers' block masks under that name only (under pnd's packed-attention
    # name, which attach gives models whose prior packs, they would attend densely)
    assert config._attn_implementation == "sdpa"
    assert torch.equal(out.sequences[:, -STEPS:], tokens)
    for got, want in zip(out.scores, scores):
        finite = torch.isfinite(got)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)
    plain, _ = greedy(model, inputs, 0.0, STEPS, banned=_eos(model))
    assert not torch.equal(plain, tokens)  # the prior moves tokens: the comparison is not vacuous
    kwargs = dict(max_new_tokens=STEPS, do_sample=False, output_scores=True, return_dict_in_generate=True)
    zero = model.generate(**inputs, **kwargs, logits_processor=[pnd.PriorNormalized(0.0)])
    pnd.detach(model)
    assert not any("forward" in vars(m) for m in model.modules() if type(m).__name__ == "MiniMaxM3VLIndexer")
    alone = model.generate(**inputs, **kwargs)
    assert torch.equal(zero.sequences, alone.sequences)
    assert all(torch.equal(a, b) for a, b in zip(zero.scores, alone.scores))


def test_minimax_sampling_scores_are_reference_scores(minimax):
    model, processor = minimax
    inputs = _minimax_inputs(processor)
    torch.manual_seed(3)
    out = pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=True, top_k=0, top_p=1.0, temperature=1.0,
        output_scores=True, return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.5)])
    reference = forced_scores(model, inputs, out.sequences[:, inputs["input_ids"].shape[1]:], 0.5)
    got = torch.stack(out.scores, 1)
    finite = torch.isfinite(got)
    torch.testing.assert_close(got[finite], reference[finite], atol=1e-4, rtol=0)


def test_minimax_beam_search_scores_are_reference_normalized_scores(minimax):
    model, processor = minimax
    inputs = _minimax_inputs(processor)
    alpha, prompt_len = 0.6, inputs["input_ids"].shape[1]
    out = pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=STEPS, num_beams=3, num_return_sequences=2, length_penalty=1.0, do_sample=False,
        output_scores=True, return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(alpha)])
    eos = model.generation_config.eos_token_id
    for row in range(out.sequences.shape[0]):
        generated = out.sequences[row, prompt_len:]
        length = int((generated == eos).nonzero()[0, 0]) + 1 if (generated == eos).any() else len(generated)
        one = _minimax_inputs(processor, MINIMAX_PROMPTS[row // 2 : row // 2 + 1], seed=row // 2)
        scores = forced_scores(model, one, generated[None, :length], alpha)[0]
        total = scores.gather(1, generated[:length, None]).sum()
        torch.testing.assert_close(out.sequences_scores[row], total / length, atol=1e-4, rtol=0)


@pytest.mark.parametrize("image", [False, True])
def test_minimax_fails_when_the_prior_indexer_may_pick_a_visual_key(minimax, monkeypatch, image):
    """The masked-not-removed mistake: the prior's visual slots masked out of attention but left to the indexer, which
    then fills top-k blocks with visual keys (video: whole blocks of them; image: a block shared with text, whose
    score a visual key may set): the prior attends other keys and the scores leave the reference's."""
    import contextlib

    model, processor = minimax
    inputs = _minimax_inputs(processor, image=image)
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=_eos(model))
    for module in (pnd.decoding.prior, pnd.decoding.steps):
        monkeypatch.setattr(module, "indexer_keys", lambda keys: contextlib.nullcontext())
    out = _normalized_greedy(model, processor, inputs)
    gap = max(float((got - want)[torch.isfinite(got)].abs().max()) for got, want in zip(out.scores, scores))
    assert not torch.equal(out.sequences[:, -STEPS:], tokens) or gap > 0.05


def test_minimax_beam_search_fails_when_the_prior_indexer_keys_are_not_reordered(minimax, monkeypatch):
    """Beam search reorders the prior rows' indexer keys (`idx_keys`) with their keys and values: leaving the indexer
    keys alone unreordered changes the beams."""
    model, processor = minimax
    inputs = _minimax_inputs(processor, MINIMAX_PROMPTS[:1])
    kwargs = dict(max_new_tokens=STEPS, num_beams=3, do_sample=False, output_scores=True, return_dict_in_generate=True,
                  logits_processor=[pnd.PriorNormalized(1.0)])
    right = pnd.attach(model, processor).generate(**inputs, **kwargs)
    reorder = PairedCache.reorder_cache

    def stale(self, beam_idx):
        before, n = layer_states(self), self.prior_attends.shape[0] if self.is_paired else 0
        reorder(self, beam_idx)
        for layer, old, new in zip(self.layers, before, layer_states(self)):
            if n and isinstance(new, IndexedState):
                kept = torch.cat([new.indexer_keys[:n], old.indexer_keys[n:]])
                set_layer_state(layer, new._replace(indexer_keys=kept))

    monkeypatch.setattr(PairedCache, "reorder_cache", stale)
    wrong = model.generate(**inputs, **kwargs)
    assert not torch.equal(right.sequences, wrong.sequences) or not torch.allclose(
        right.sequences_scores, wrong.sequences_scores, atol=1e-3)


def test_minimax_refuses_left_padding_which_transformers_itself_gets_wrong(minimax):
    """Prompts of different lengths, left-padded: transformers' own generate decodes the shorter prompt differently
    from the same prompt alone (its indexer's blocks shift with the padding), so pnd refuses such a batch, naming it,
    before any work (generate, prior_logits, CaptionScorer)."""
    model, processor = minimax
    padded = _minimax_inputs(processor, PROMPTS)
    assert not padded["attention_mask"].all()
    kwargs = dict(max_new_tokens=4, do_sample=False)
    together = model.generate(**padded, **kwargs)[:, -4:]
    alone = [model.generate(**_minimax_inputs(processor, (p,), seed=i), **kwargs)[0, -4:] for i, p in enumerate(PROMPTS)]
    assert any(not torch.equal(together[i], alone[i]) for i in range(len(PROMPTS)))
    refusal = r"prompt row\(s\) \[0\] are padded .* 'minimax_m3_sparse' anchor the indexer's key blocks to cache slots"
    with pytest.raises(ValueError, match=rf"PriorNormalized \(alpha > 0\): {refusal}"):
        pnd.attach(model, processor).generate(**padded, **kwargs, logits_processor=[pnd.PriorNormalized(0.5)])
    with pytest.raises(ValueError, match=rf"^M3ID: {refusal}"):  # the method the user passed
        model.generate(**padded, **kwargs, logits_processor=[pnd.M3ID(prior="masked")])
    with pytest.raises(ValueError, match=rf"pnd's prior: {refusal}"):
        pnd.prior_logits(model, **padded)
    with pytest.raises(ValueError, match=rf"CaptionScorer: {refusal}"):
        pnd.CaptionScorer(model, processor).score_prompts(padded, [["a cat"], ["a dog"]])
    with pytest.raises(ValueError, match=r"prior='text' is not supported on minimax_m3_vl_text"):
        pnd.prior_logits(model, **_minimax_inputs(processor), mode="text")


def test_minimax_paired_cache_moves_the_indexer_keys_and_returns_the_conditioned_rows(minimax):
    """After the prefill the prior rows hold, at the kept slots, the keys, values and indexer keys of the kept tokens
    alone (the reference's position-binned forward); batch selection moves both halves of every layer, indexer keys
    included; generate returns the conditioned rows: a plain forward's cache."""
    model, processor = minimax
    inputs = _minimax_inputs(processor)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    calls, out = language_model_calls(model, lambda: pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=3, min_new_tokens=3, do_sample=False, return_dict_in_generate=True,
        logits_processor=[pnd.PriorNormalized(0.5)]))
    n, length = ids.shape
    cache = calls[-1]["past_key_values"]
    kept = ~visual_positions(model, ids)
    with torch.no_grad():
        prior, compact = kept_tokens_forward(model, ids, kept, conditioned_positions(model, ids, mask, inputs),
                                             use_cache=True)
    states = layer_states(cache)
    for state, want in zip(states, layer_states(prior.past_key_values)):
        for got_tensor, want_tensor in zip(state, want):
            if got_tensor is None:
                continue
            torch.testing.assert_close(got_tensor[n:, :, :length].transpose(1, 2)[kept],
                                       want_tensor.transpose(1, 2)[compact], atol=1e-4, rtol=0)
    assert sum(isinstance(state, IndexedState) and state.indexer_keys is not None for state in states) == 2
    before = [list(state) for state in states]
    cache.batch_select_indices(torch.tensor([1], device=DEVICE))
    for state, then in zip(layer_states(cache), before):
        for now, old in zip(state, then):
            assert (now is None) == (old is None) and (now is None or torch.equal(now, old[[1, 3]]))
    sequence = out.sequences[:, :-1]
    with torch.no_grad():
        plain = model(**inputs | {"input_ids": sequence, "attention_mask": torch.ones_like(sequence)},
                      use_cache=True).past_key_values
    returned = out.past_key_values
    assert not isinstance(returned, PairedCache)
    for got, want in zip(layer_states(returned), layer_states(plain)):
        assert type(got) is type(want)
        for got_tensor, want_tensor in zip(got, want):
            assert (got_tensor is None) == (want_tensor is None)
            if got_tensor is not None:
                torch.testing.assert_close(got_tensor, want_tensor, atol=1e-4, rtol=0)


def _noise_in_hidden_prior_slots(monkeypatch):
    """After the prefill, the prior rows' hidden prompt slots (visual) hold large random keys, values and indexer keys
    instead of pnd's zeros (a zero indexer key scores 0, which rarely beats the best text block)."""
    add_prior = PairedCache.add_prior

    def noisy(self, prior):
        add_prior(self, prior)
        n, length = prior.attends.shape
        generator = torch.Generator().manual_seed(0)  # drawn on the CPU: the same noise on every device

        def noise(t):  # a sliding-window layer (dots3's) holds the prompt's last slots only
            held = min(length, t.shape[2])
            rows = t[n:, :, :held]
            hidden = torch.where(prior.attends[:, None, length - held :, None], rows,
                                 10 * torch.randn(rows.shape, generator=generator, dtype=rows.dtype).to(DEVICE))
            return torch.cat([t[:n], torch.cat([hidden, t[n:, :, held:]], 2)])

        for layer, state in zip(self.layers, layer_states(self)):
            set_layer_state(layer, map_states(noise, state))

    monkeypatch.setattr(PairedCache, "add_prior", noisy)


def _greedy_with_noise_in_hidden_prior_slots(model, processor, inputs, monkeypatch):
    """pnd's normalized greedy decoding with noise in the prior rows' hidden slots equals the reference's; returns the
    reference's (tokens, scores)."""
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=_eos(model))
    _noise_in_hidden_prior_slots(monkeypatch)
    out = _normalized_greedy(model, processor, inputs)
    assert torch.equal(out.sequences[:, -STEPS:], tokens)
    for got, want in zip(out.scores, scores):
        finite = torch.isfinite(got)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)
    return tokens, scores


@pytest.mark.parametrize("image", [False, True])
def test_minimax_decoding_steps_hide_the_visual_keys_from_the_indexer(minimax, monkeypatch, image):
    """Whatever the prior rows' visual slots hold, the decoding steps hide them from attention (mask) and from the
    indexer (`indexer_keys`): the reference's tokens and scores. Without the indexer's key mask in the steps, the
    indexer picks blocks of those keys over text blocks, and the scores leave the reference's."""
    import contextlib

    model, processor = minimax
    inputs = _minimax_inputs(processor, image=image)
    tokens, scores = _greedy_with_noise_in_hidden_prior_slots(model, processor, inputs, monkeypatch)
    monkeypatch.setattr(pnd.decoding.steps, "indexer_keys", lambda keys: contextlib.nullcontext())
    out = _normalized_greedy(model, processor, inputs)
    gap = max(float((got - want)[torch.isfinite(got)].abs().max()) for got, want in zip(out.scores, scores))
    assert not torch.equal(out.sequences[:, -STEPS:], tokens) or gap > 0.05


# Mistral Large 4 and dots3: DeepSeek Sparse Attention whose indexer scores each key alone and takes its top-k after the
# attention mask. Unlike GLM-5-next's pools of neighbouring slots, a hidden key there is a removed one; their rows
# (`"<text model type>:indexed_attention"`) keep the prior in the prompt's slots, which dots3's sliding windows count.
@pytest.mark.parametrize("model_type, removal_is_masking", [
    ("mistral_large4", True), ("dots3_note", True), ("glm5_next", False)])
def test_per_key_indexers_hide_a_masked_key_as_if_removed(model_type, removal_is_masking):
    """Along the reference's greedy tokens, the model on the whole sequence with the visual slots masked gives the
    logits of the kept tokens alone (at their positions) for the per-key indexers, not for GLM-5-next's pooled one."""
    from pnd.testing.reference import full_logits

    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=True)
    tokens, _ = greedy(model, inputs, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    gaps = []
    with torch.no_grad():
        for k in range(STEPS):
            sequence = torch.cat([inputs["input_ids"], tokens[:, :k]], 1)
            removed = full_logits(model, inputs, sequence, prior=True, removed=True)
            gaps.append(float((full_logits(model, inputs, sequence, prior=True, removed=False) - removed).abs().max()))
    assert (max(gaps) < 1e-4) == removal_is_masking, gaps


def test_dots3_indexed_layers_keep_the_prompts_slots(monkeypatch):
    """dots3's own row is not GLM-5-next's: given GLM-5-next's (the kept tokens side by side), its sliding-window
    layers, whose windows count the prompt's slots, could not be served, and pnd refuses."""
    config = tiny_model("dots3_note")[0].config.get_text_config(decoder=True)
    kinds = layer_plan(config).kinds
    assert kinds[0] is LAYER_KINDS["dots3_note_text:indexed_attention"] and not kinds[0].compact
    assert LAYER_KINDS["indexed_attention"].compact  # GLM-5-next's, Qwen4's
    monkeypatch.delitem(LAYER_KINDS, "dots3_note_text:indexed_attention")  # the layer type's own row then applies
    with pytest.raises(ValueError, match="its indexed layers need the prior's tokens side by side"):
        layer_plan(config)


@pytest.mark.parametrize("model_type", ["mistral_large4", "dots3_note"])
def test_per_key_indexers_need_no_indexer_key_mask_in_the_steps(monkeypatch, model_type):
    """Whatever the prior rows' visual slots hold (large random keys, values and indexer keys), the decoding steps' mask
    alone hides them from these indexers, which take their top-k after it (MiniMax-M3's needs `indexer_keys`): the
    reference's tokens and scores."""
    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=model_type == "mistral_large4")
    _greedy_with_noise_in_hidden_prior_slots(model, processor, inputs, monkeypatch)
