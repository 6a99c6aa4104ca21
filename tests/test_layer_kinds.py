"""docs/design.md §1, §4: what the prior does in each layer type is declared in one table (`pnd/layers.py`); an
undeclared layer type is refused by name; the new kinds (recurrent layers with several states, indexed sparse
attention) are exact, and each fails the reference when it is handled as the masked-only layers are.

Qwen4 (exp) mixes Gated DeltaNet (three states per layer with its n-gram embeddings) and indexed attention, and is
checked against the from-scratch reference in `test_exactness.py` like every family. GLM-5-next (KDA and indexed MLA)
is checked here against a reference that decodes with transformers' own cache: transformers 5.23's cached decoding of
GLM-5-next differs from its uncached forward (by up to 0.1 in a logit, plain `generate`, no pnd, at sequence lengths
where a key pool of its indexer completes), so a from-scratch reference cannot check it to 1e-4.
"""

import dataclasses

import pytest
import torch

import pnd
from pnd._compat import layer_states, map_states, set_layer_state
from pnd.cache import PairedCache
from pnd.layers import LAYER_KINDS, layer_plan
from pnd.testing import TINY_ARCHITECTURES, tiny_inputs, tiny_model

from helpers import PROMPTS
from reference import PIXEL_KEYS, TOKEN_TYPES, conditioned_positions, kept_tokens_forward, visual_positions

STEPS = 6


@pytest.mark.parametrize("model_type", [*TINY_ARCHITECTURES, "glm5_next"])
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


def test_a_refused_layer_kind_says_why():
    config = tiny_model("minimax_m3_vl")[0].config.get_text_config(decoder=True)
    with pytest.raises(ValueError, match=r"'minimax_m3_sparse' \(layer 0 of minimax_m3_vl_text\): its indexer anchors"):
        layer_plan(config)


def _cached_reference(model, inputs, alpha, steps, banned):
    """Normalized greedy decoding with transformers' own cache, independent of pnd: the conditioned prompt through the
    whole model, the kept tokens alone (left-padded, at their conditioned positions) through it, then each chosen
    token into both caches. Returns (tokens, per-step normalized scores)."""
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    positions = conditioned_positions(model, ids, mask, inputs)
    kept = mask.bool() & ~visual_positions(model, ids)
    pixels = {k: inputs[k] for k in (*PIXEL_KEYS, *TOKEN_TYPES) if k in inputs}
    with torch.no_grad():
        cond = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **pixels)
        prior, prior_mask = kept_tokens_forward(model, ids, kept, positions, use_cache=True)
    caches, masks = [cond.past_key_values, prior.past_key_values], [mask, prior_mask.long()]
    logits, tokens, scores = [cond.logits[:, -1], prior.logits[:, -1]], [], []
    for _ in range(steps):
        score = torch.log_softmax(logits[0].float(), -1) - alpha * torch.log_softmax(logits[1].float(), -1)
        scores.append(score)
        token = score.index_fill(1, torch.tensor(banned), -torch.inf).argmax(-1, keepdim=True)
        tokens.append(token)
        positions = positions[..., -1:] + 1
        for i in range(2):
            masks[i] = torch.cat([masks[i], torch.ones_like(token)], 1)
            with torch.no_grad():
                logits[i] = model(input_ids=token, attention_mask=masks[i], position_ids=positions,
                                  past_key_values=caches[i], use_cache=True).logits[:, -1]
    return torch.cat(tokens, 1), scores


def _normalized_greedy(model, processor, inputs):
    return pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, output_scores=True,
        return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.7)])


@pytest.mark.parametrize("image", [False, True])
def test_glm5_next_equals_the_cached_reference(image):
    """KDA and indexed MLA: a left-padded batch decodes the reference's tokens, with its scores."""
    model, processor = tiny_model("glm5_next")
    inputs = tiny_inputs(processor, "glm5_next", PROMPTS, image=image)
    assert (inputs["attention_mask"] == 0).any()
    out = _normalized_greedy(model, processor, inputs)
    tokens, scores = _cached_reference(model, inputs, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    assert torch.equal(out.sequences[:, -STEPS:], tokens)
    for got, want in zip(out.scores, scores):
        finite = torch.isfinite(got)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)


def test_glm5_next_indexed_layers_fail_with_the_prior_in_the_prompts_slots(monkeypatch):
    """The masked-not-removed mistake in an indexed layer: the prior rows left in the conditioned prompt's slots (visual
    slots masked) make GLM-5-next's indexer group masked slots into its key pools, so the prior attends other keys
    than on the kept tokens alone, and the scores leave the reference's."""
    model, processor = tiny_model("glm5_next")
    inputs = tiny_inputs(processor, "glm5_next", PROMPTS)
    tokens, scores = _cached_reference(model, inputs, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    masked = dataclasses.replace(LAYER_KINDS["indexed_attention"], prior="mask", compact=False)
    monkeypatch.setitem(LAYER_KINDS, "indexed_attention", masked)
    out = _normalized_greedy(model, processor, inputs)
    gap = max(float((got - want)[torch.isfinite(got)].abs().max()) for got, want in zip(out.scores, scores))
    assert not torch.equal(out.sequences[:, -STEPS:], tokens) or gap > 0.05


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
    ("nemotron_h_omni", "linear_attention", True),  # Mamba-2 (its video + beam crash in transformers itself)
])
def test_beam_search_fails_when_a_layer_kind_keeps_stale_prior_rows(monkeypatch, model_type, layer_type, image):
    """Beam search reorders the prior rows of every layer kind (Gated DeltaNet's three states, Mamba-2's convolution and
    SSM states; the indexed layer's keys, values, indexer keys and positions): leaving one kind's prior rows
    unreordered changes the beams."""
    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1], image=image)
    kwargs = dict(max_new_tokens=STEPS, num_beams=3, do_sample=False, output_scores=True, return_dict_in_generate=True,
                  logits_processor=[pnd.PriorNormalized(1.0)])
    right = pnd.attach(model, processor).generate(**inputs, **kwargs)
    _stale_prior_rows(monkeypatch, model.config.get_text_config(decoder=True).layer_types, layer_type)
    wrong = model.generate(**inputs, **kwargs)
    assert not torch.equal(right.sequences, wrong.sequences) or not torch.allclose(
        right.sequences_scores, wrong.sequences_scores, atol=1e-3)
