"""Inkling 2's hybrid layers (`pnd/architectures/inkling.py`): attention with short convolutions on its keys and values
and after it, whose relative position bias and sliding window count cache slots. The prior's rows keep the conditioned
prompt's layout (slots are positions there), its own prefill call runs the kept tokens side by side (the convolutions
see them alone) with the bias and window read from their position ids; the reference (`reference.kept_tokens_forward`)
runs the kept tokens alone with the bias and window by their slots in the whole sequence. The decoding suites
(`test_exactness.py` and others) run the family against it; here, each part of the mechanism fails it when wrong.
"""

import pytest
import torch

import pnd
import pnd.architectures.inkling as inkling
from pnd._compat.cache_rows import (
    HybridState,
    cache_from_layers,
    copy_prompt_length,
    layer_states,
    map_slots,
    map_states,
    set_layer_state,
)
from pnd._compat.repairs import kept_positions
from pnd.testing import tiny_inputs, tiny_model
from pnd.testing.reference import conditioned_positions, full_logits, greedy

from helpers import PROMPTS, assert_scores_close

INKLING = ("inkling2", "inkling_mm_model")


@pytest.mark.parametrize("model_type", INKLING)
def test_hybrid_rows_carry_keys_values_and_convolution_states(tiny, model_type):
    """Inkling's cache layer holds keys and values (a window of them in `hybrid_sliding` layers) and four convolution
    states: pnd's row operations carry both (`HybridState`), a slot operation leaves the convolution states as they are,
    and a cache rebuilt from them continues decoding as the original does."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=True)
    out = model.generate(**inputs, max_new_tokens=3, do_sample=False, return_dict_in_generate=True)
    cache, window = out.past_key_values, model.config.text_config.sliding_window
    states = layer_states(cache)
    assert all(isinstance(state, HybridState) for state in states)
    assert states[0].keys.shape[2] == window - 1 < states[1].keys.shape[2] == out.sequences.shape[1] - 1
    layer = cache.layers[0]
    assert all(torch.equal(conv, layer.conv_states[i]) for i, conv in enumerate(states[0].recurrent.conv))
    cut = map_slots(lambda t: t[:, :, -2:], states[0])
    assert cut.keys.shape[2] == 2 and cut.recurrent is states[0].recurrent
    rebuilt = cache_from_layers(model.config.get_text_config(decoder=True), states)
    copy_prompt_length(cache, rebuilt)
    step = dict(input_ids=out.sequences[:, -1:], attention_mask=torch.cat([inputs["attention_mask"], torch.ones_like(
        out.sequences[:, inputs["input_ids"].shape[1]:])], 1), use_cache=True)
    step["position_ids"] = conditioned_positions(model, out.sequences, step["attention_mask"], inputs)[:, -1:]
    with torch.no_grad():
        want = model(**step, past_key_values=cache).logits
        got = model(**step, past_key_values=rebuilt).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    set_layer_state(layer, map_states(lambda t: t[[1]], states[0]))
    assert torch.equal(layer.keys, states[0].keys[[1]])
    assert torch.equal(layer.conv_states[3], states[0].recurrent.conv[3][[1]])


def _slot_window(monkeypatch):
    """The prior's own call with each sliding layer's window by the slots of that call (the kept tokens side by side),
    its bias still by position ids."""
    by_positions = inkling._bias_by_positions
    monkeypatch.setattr(inkling, "_bias_by_positions", lambda bias, window, *args: by_positions(bias, None, *args))


def _slot_bias(monkeypatch):
    """The prior's own call with transformers' bias and window: by the slots of that call."""
    monkeypatch.setattr(inkling, "given_kept_positions", lambda: None)


@pytest.mark.parametrize("model_type", INKLING)
@pytest.mark.parametrize("break_it", [None, _slot_bias, _slot_window])
def test_prior_is_the_kept_tokens_alone_at_their_distances(tiny, monkeypatch, break_it, model_type):
    """The prior's prefill is the kept tokens alone, their bias and window by their distances in the conditioned prompt
    (the reference's masked-out slots); by their slots side by side in the prior's call, it is not."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=True)
    inkling.INKLING2.unprepare(model)  # an earlier call's patch (prior_logits prepares the model): the one given here
    if break_it is not None:
        break_it(monkeypatch)
    try:
        prior = pnd.prior_logits(model, **inputs)
    finally:
        inkling.INKLING2.unprepare(model)
    want = full_logits(model, inputs, inputs["input_ids"], prior=True)
    assert torch.allclose(prior.float(), want, atol=1e-4, rtol=0) == (break_it is None), (prior - want).abs().max()


@pytest.mark.parametrize("model_type", INKLING)
def test_bias_by_positions_is_transformers_own_where_slots_are_positions(tiny, model_type):
    """On a left-padded conditioned batch (slots = positions + each row's padding), the bias and window read from the
    position ids give transformers' own logits, bit for bit, on every attended token."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=True)
    mask = inputs["attention_mask"]
    assert not mask.all()
    positions = conditioned_positions(model, inputs["input_ids"], mask, inputs)
    inkling.INKLING2.prepare(model)
    with torch.no_grad():
        own = model(**inputs, position_ids=positions).logits
        with kept_positions(positions, positions):
            read = model(**inputs, position_ids=positions).logits
    assert torch.equal(own[mask.bool()], read[mask.bool()])


@pytest.mark.parametrize("model_type", INKLING)
def test_text_prior_is_refused(tiny, model_type):
    """prior='text' renumbers the kept tokens, which the decoding steps' slots (the conditioned prompt's) would no
    longer match."""
    model, processor = tiny(model_type)
    with pytest.raises(ValueError, match=r"prior='text' is not supported on inkling2?_text \(its layer types 'hybrid'"):
        pnd.prior_logits(model, **tiny_inputs(processor, model_type, image=True), mode="text")


@pytest.mark.parametrize("model_type", INKLING)
def test_decoding_past_the_window_matches_the_reference(tiny, model_type):
    """A prompt whose text after the image is shorter than the window (its first steps' windows hold masked visual
    slots), decoded past the window (which then slides over generated tokens): the reference's tokens and scores."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, ("a", PROMPTS[1]), image=True)
    steps = model.config.text_config.sliding_window + 4
    tokens, scores = greedy(model, inputs, 0.7, steps, banned=[model.generation_config.eos_token_id])
    out = pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=steps, min_new_tokens=steps, do_sample=False, output_scores=True,
        return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.7)])
    assert torch.equal(out.sequences[:, -steps:], tokens)
    for got, want in zip(out.scores, scores):
        assert_scores_close(got, want)


def test_inkling_prompts_reaching_its_query_scaling_are_refused():
    """Inkling's full layers scale queries by the log of their cache slot from `log_scaling_n_floor` on, which the
    prior's own call (the kept tokens side by side) cannot give: a prompt reaching it is refused, one below it is not
    (there every query's scale is 1, in both calls)."""
    model, processor = tiny_model("inkling_mm_model")
    inputs = tiny_inputs(processor, "inkling_mm_model", image=True)
    length = inputs["input_ids"].shape[1]
    model.config.text_config.log_scaling_n_floor = length + 1
    pnd.prior_logits(model, **inputs)
    inkling.INKLING.unprepare(model)
    model.config.text_config.log_scaling_n_floor = length
    with pytest.raises(ValueError, match=rf"prompts of {length} tokens on this Inkling model: .*log_scaling_n_floor"):
        pnd.prior_logits(model, **inputs)


def test_inkling_audio_is_refused_at_alpha_above_zero(tiny):
    model, processor = tiny("inkling_mm_model")
    inputs = tiny_inputs(processor, "inkling_mm_model", image=True)
    audio = torch.zeros(1, 4, model.config.audio_config.n_mel_bins, dtype=torch.long)
    with pytest.raises(ValueError, match=r"does not support audio inputs \(.*audio_input_ids\)"):
        pnd.attach(model, processor).generate(**inputs, audio_input_ids=audio, max_new_tokens=2,
                                              logits_processor=[pnd.PriorNormalized(0.5)])
