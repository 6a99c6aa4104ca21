"""docs/design.md §1, §4: what the prior does in each layer type is declared in one table (`pnd/architectures/layers.py`); an
undeclared layer type is refused by name; the new kinds (recurrent layers with several states, indexed sparse
attention) are exact, and each fails the reference when it is handled as the masked-only layers are.

Qwen4 (exp) mixes Gated DeltaNet (three states per layer with its n-gram embeddings) and indexed attention, GLM-5-next
KDA and indexed MLA, Nemotron-H Omni Mamba-2 and attention: each is checked against the from-scratch reference in
`test_exactness.py` like every family; here, that each new kind fails it when handled wrongly (Mamba-2's masked-only
prior: `test_hybrid.py::test_decoding_fails_with_a_leaky_prior`).
"""

import dataclasses

import pytest
import torch

import pnd
from pnd._compat import layer_states, map_states, set_layer_state
from pnd.architectures.layers import LAYER_KINDS, layer_plan
from pnd.decoding.cache import PairedCache
from pnd.testing import TINY_ARCHITECTURES, tiny_inputs, tiny_model

from helpers import PROMPTS
from reference import greedy

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


def test_a_refused_layer_kind_says_why():
    config = tiny_model("minimax_m3_vl")[0].config.get_text_config(decoder=True)
    with pytest.raises(ValueError, match=r"'minimax_m3_sparse' \(layer 0 of minimax_m3_vl_text\): its indexer anchors"):
        layer_plan(config)


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
])
def test_beam_search_fails_when_a_layer_kind_keeps_stale_prior_rows(monkeypatch, model_type, layer_type, image):
    """Beam search reorders the prior rows of every layer kind (Gated DeltaNet's three states, KDA's and Mamba-2's
    convolution and recurrent states; the indexed layers' keys, values, indexer keys and positions): leaving one kind's
    prior rows unreordered changes the beams."""
    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1], image=image)
    kwargs = dict(max_new_tokens=STEPS, num_beams=3, do_sample=False, output_scores=True, return_dict_in_generate=True,
                  logits_processor=[pnd.PriorNormalized(1.0)])
    right = pnd.attach(model, processor).generate(**inputs, **kwargs)
    _stale_prior_rows(monkeypatch, model.config.get_text_config(decoder=True).layer_types, layer_type)
    wrong = model.generate(**inputs, **kwargs)
    assert not torch.equal(right.sequences, wrong.sequences) or not torch.allclose(
        right.sequences_scores, wrong.sequences_scores, atol=1e-3)
