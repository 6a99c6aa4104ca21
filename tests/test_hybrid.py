"""Hybrid language models (Qwen3.5: Gated-DeltaNet layers around full attention; LFM2-VL: short convolutions around
full attention): the prior's recurrent layers see the kept tokens only, as if the visual expansion were absent
(docs/design.md, "The prior").

The brute-force reference (`pnd.testing.reference`) runs the kept tokens alone through the whole model; the decoding-mode tests
(greedy, beam search, sampling, batches, alpha=0) run on both families in `test_exactness.py`. Here: what is particular
to recurrent layers, and that a prior which lets the expansion reach them gives other tokens (the tests are not vacuous).
"""

import pytest
import torch

import pnd
from pnd.testing.reference import (
    PIXEL_KEYS,
    conditioned_positions,
    full_logits,
    greedy,
    kept_tokens_forward,
    normalized_scores,
    placeholders_only_removed,
    sequence_mask,
    visual_positions,
)

from helpers import DEVICE, PROMPTS, language_model_calls, on_device, tiny_inputs

STEPS = 6
HYBRID = ("qwen3_5", "lfm2_vl")


def _eos(model):
    return [model.generation_config.eos_token_id]


def _span_zeroed_in_recurrent_layers(model, inputs, sequence):
    """Leaky prior: the whole sequence with the expansion masked out (2-D mask): attention layers do not see it, but
    the recurrent layers run over it with zeroed inputs (their state decays, their convolution spans the gap)."""
    return full_logits(model, inputs, sequence, prior=True, removed=False)


def _span_visible_to_recurrent_layers(model, inputs, sequence):
    """Leaky prior: attention layers mask the expansion out (4-D mask), the recurrent layers see the video."""
    length = sequence.shape[1]
    keys = torch.ones_like(sequence, dtype=torch.bool)
    keys[:, : inputs["input_ids"].shape[1]] = ~visual_positions(model, inputs["input_ids"])
    causal = torch.ones(length, length, dtype=torch.bool, device=DEVICE).tril()
    itself = torch.eye(length, dtype=torch.bool, device=DEVICE)  # a masked query sees itself: no NaN
    allowed = causal & keys[:, None, :] | itself
    positions = conditioned_positions(model, sequence, sequence_mask(inputs, sequence), inputs)
    pixels = {k: inputs[k] for k in PIXEL_KEYS if k in inputs}
    with torch.no_grad():
        logits = model(input_ids=sequence, attention_mask=allowed[:, None], position_ids=positions, **pixels).logits
    return logits[:, -1].float()


LEAKY_PRIORS = {"placeholders_only": placeholders_only_removed, "span_zeroed": _span_zeroed_in_recurrent_layers,
                "span_visible": _span_visible_to_recurrent_layers}


@pytest.mark.parametrize("model_type", ["qwen3_5", "nemotron_h_omni"])  # Gated DeltaNet, Mamba-2
@pytest.mark.parametrize("leak", sorted(LEAKY_PRIORS))
def test_decoding_fails_with_a_leaky_prior(tiny, model_type, leak):
    """pnd's tokens are the reference's (kept tokens alone through every layer); a prior that lets the expansion reach
    the model (timestamps left in, or the span reaching the recurrent layers) gives other tokens."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1])  # unpadded: the 4-D mask variant has no padding mask
    out = pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                                     logits_processor=[pnd.PriorNormalized(1.0)])
    right, _ = greedy(model, inputs, 1.0, STEPS, banned=_eos(model))
    wrong, _ = greedy(model, inputs, 1.0, STEPS, banned=_eos(model), prior=LEAKY_PRIORS[leak])
    assert torch.equal(out[:, -STEPS:], right)
    assert not torch.equal(right, wrong)


@pytest.mark.parametrize("leak", sorted(LEAKY_PRIORS))
def test_lfm2_vl_scores_fail_with_a_leaky_prior(tiny, leak):
    """pnd's tokens and scores are the reference's (kept tokens alone through every layer: no convolution spans the
    removed image block); along those tokens, a prior that lets the expansion reach the model (its delimiters and tile
    markers left in, or the block reaching the short convolutions) scores far outside the exactness tests' tolerance
    (1e-4). Whether its argmax moves too depends on the random weights (a convolution sees two tokens back only); the
    gap does not."""
    model, processor = tiny("lfm2_vl")
    inputs = tiny_inputs(processor, "lfm2_vl", PROMPTS[:1])  # unpadded: the 4-D mask variant has no padding mask
    out = pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                                     output_scores=True, return_dict_in_generate=True,
                                     logits_processor=[pnd.PriorNormalized(1.0)])
    right, scores = greedy(model, inputs, 1.0, STEPS, banned=_eos(model))
    assert torch.equal(out.sequences[:, -STEPS:], right)
    gap = 0.0
    for k, (got, want) in enumerate(zip(out.scores, scores)):
        finite = torch.isfinite(got)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)
        sequence = torch.cat([inputs["input_ids"], right[:, :k]], 1)
        with torch.no_grad():
            leaky = normalized_scores(model, inputs, sequence, 1.0, prior=LEAKY_PRIORS[leak])
        gap = max(gap, float((leaky - want)[finite].abs().max()))
    assert gap > 0.05


def _prefill_calls(model, inputs):
    """The language model's keyword arguments at each call of a one-token normalized `generate`."""
    return language_model_calls(model, lambda: pnd.attach(model).generate(
        **inputs, max_new_tokens=1, do_sample=False, logits_processor=[pnd.PriorNormalized(0.5)]))[0]


def _recurrent(layer):
    return hasattr(layer, "recurrent_states")


def _states(layer):
    """A recurrent cache layer's states by name: Gated DeltaNet has both, a short convolution (LFM2) a conv state only."""
    return {name: getattr(layer, name)[0] for name in ("conv_states", "recurrent_states")
            if getattr(layer, name)[0] is not None}


@pytest.mark.parametrize("model_type", HYBRID)
def test_hybrid_prefill_runs_every_kept_token_and_the_paired_cache_holds_their_states(tiny, model_type):
    """No packing and no reuse of the text before the video: the prior's own call computes every kept token. After
    the prefill, the paired cache's prior rows hold the recurrent states and (at the kept slots) the keys/values of
    a forward on the kept tokens alone, its conditioned rows those of a plain forward (left-padded batch)."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    assert (mask == 0).any()
    assert not pnd.decoding.packed.packs_prior(model, {"logits_to_keep": 1})
    kept = mask.bool() & ~visual_positions(model, ids)
    calls = _prefill_calls(model, inputs)
    assert len(calls) == 2 and calls[1]["input_ids"].shape[1] == int(kept.sum(1).max())
    cache, n = calls[0]["past_key_values"], ids.shape[0]

    positions = conditioned_positions(model, ids, mask, inputs)
    pixels = {k: inputs[k] for k in PIXEL_KEYS if k in inputs}
    with torch.no_grad():
        plain = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **pixels)
        prior, compact = kept_tokens_forward(model, ids, kept, positions, use_cache=True)
    layers = zip(cache.layers, plain.past_key_values.layers, prior.past_key_values.layers)
    for got, want_cond, want_prior in layers:
        if _recurrent(got):
            states, cond_states, prior_states = _states(got), _states(want_cond), _states(want_prior)
            assert states and states.keys() == cond_states.keys() == prior_states.keys()
            for name, both in states.items():
                torch.testing.assert_close(both[:n], cond_states[name], atol=1e-4, rtol=0)
                torch.testing.assert_close(both[n:], prior_states[name], atol=1e-4, rtol=0)
        else:
            for name in ("keys", "values"):
                both, length = getattr(got, name), ids.shape[1]
                torch.testing.assert_close(both[:n].transpose(1, 2)[mask.bool()],
                                           getattr(want_cond, name).transpose(1, 2)[mask.bool()], atol=1e-4, rtol=0)
                torch.testing.assert_close(both[n:, :, :length].transpose(1, 2)[kept],
                                           getattr(want_prior, name).transpose(1, 2)[compact], atol=1e-4, rtol=0)
    assert any(_recurrent(layer) for layer in cache.layers) and not all(_recurrent(layer) for layer in cache.layers)


def _tensors(layer):
    """A cache layer's per-row tensors: a recurrent layer's states, an attention layer's keys and values."""
    return list(_states(layer).values()) if _recurrent(layer) else [layer.keys, layer.values]


@pytest.mark.parametrize("model_type", HYBRID)
def test_hybrid_batch_selection_moves_both_halves_of_every_layer(tiny, model_type):
    model, processor = tiny(model_type)
    cache = _prefill_calls(model, tiny_inputs(processor, model_type, PROMPTS))[0]["past_key_values"]
    before = [_tensors(layer) for layer in cache.layers]
    cache.batch_select_indices(torch.tensor([1], device=DEVICE))
    for layer, tensors in zip(cache.layers, before):
        for now, then in zip(_tensors(layer), tensors):
            assert torch.equal(now, then[[1, 3]])  # [conditioned row 1; prior row 1] of 2 + 2 rows
    assert cache.prior_attends.shape[0] == 1


@pytest.mark.parametrize("model_type", HYBRID)
def test_hybrid_returned_cache_holds_the_conditioned_rows(tiny, model_type):
    """`generate` returns the conditioned rows' cache, recurrent states included: those of a plain forward over the
    prompt and the tokens generated before the last."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    out = pnd.attach(model).generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                                     return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.5)])
    sequence = out.sequences[:, :-1]
    mask = sequence_mask(inputs, sequence)
    pixels = {k: inputs[k] for k in PIXEL_KEYS if k in inputs}
    with torch.no_grad():
        plain = model(input_ids=sequence, attention_mask=mask, position_ids=conditioned_positions(model, sequence, mask,
                      inputs), use_cache=True, **pixels).past_key_values
    returned = out.past_key_values
    assert not isinstance(returned, pnd.decoding.cache.PairedCache)
    for got, want in zip(returned.layers, plain.layers):
        if _recurrent(got):
            assert _states(got).keys() == _states(want).keys()
            for name, state in _states(got).items():
                torch.testing.assert_close(state, _states(want)[name], atol=1e-4, rtol=0)
        else:
            torch.testing.assert_close(got.keys.transpose(1, 2)[mask.bool()], want.keys.transpose(1, 2)[mask.bool()],
                                       atol=1e-4, rtol=0)


def test_qwen3_5_prior_does_not_depend_on_the_timestamps(tiny):
    """Two videos whose expansions differ only in their `<t seconds>` text: the same prior, the reference's."""
    model, processor = tiny("qwen3_5")
    text = [pnd.io.prompts.video_prompt(processor, "Describe the video.")]
    runs = [on_device(processor(text=text, videos=[pnd.testing.random_video(0)], return_tensors="pt",
                                video_metadata=[{"fps": fps, "total_num_frames": 4, "frames_indices": [0, 1, 2, 3]}]))
            for fps in (24, 0.5)]
    assert runs[0]["input_ids"].shape == runs[1]["input_ids"].shape
    assert not torch.equal(runs[0]["input_ids"], runs[1]["input_ids"])
    priors = [pnd.prior_logits(model, **inputs) for inputs in runs]
    torch.testing.assert_close(priors[0], priors[1], atol=1e-5, rtol=0)
    torch.testing.assert_close(priors[0].float(), full_logits(model, runs[0], runs[0]["input_ids"], prior=True),
                               atol=1e-4, rtol=0)
    leaky = [placeholders_only_removed(model, inputs, inputs["input_ids"]) for inputs in runs]
    assert not torch.allclose(leaky[0], leaky[1], atol=1e-3)


@pytest.mark.parametrize("model_type", HYBRID)
def test_hybrid_text_prior_mode_is_the_prompt_without_its_expansion(tiny, model_type):
    """prior="text": the kept tokens renumbered from 0, i.e. the model on the prompt with the expansion cut out, at
    the prefill and while decoding (alpha=1: the prior's log-softmax is the conditioned one minus the score)."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1])
    text_only = inputs["input_ids"][~visual_positions(model, inputs["input_ids"])][None]
    with torch.no_grad():
        want = model(input_ids=text_only).logits[:, -1]
    torch.testing.assert_close(pnd.prior_logits(model, **inputs, mode="text"), want, atol=1e-4, rtol=0)
    out = pnd.attach(model).generate(**inputs, max_new_tokens=3, min_new_tokens=3, do_sample=False,
                                     output_scores=True, return_dict_in_generate=True,
                                     logits_processor=[pnd.PriorNormalized(1.0, prior="text")])
    generated = out.sequences[:, inputs["input_ids"].shape[1]:]
    for k, scores in enumerate(out.scores):
        sequence = torch.cat([inputs["input_ids"], generated[:, :k]], 1)
        with torch.no_grad():
            logits = model(input_ids=torch.cat([text_only, generated[:, :k]], 1)).logits[:, -1]
            prior = torch.log_softmax(logits.float(), -1)
        got = torch.log_softmax(full_logits(model, inputs, sequence, prior=False), -1) - scores
        finite = torch.isfinite(scores)  # min_new_tokens bans EOS
        torch.testing.assert_close(got[finite], prior[finite], atol=1e-4, rtol=0)
