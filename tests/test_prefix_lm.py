"""Prefix LMs (PaliGemma, `pnd/architectures/prefix_lm.py`): the prompt attends to itself both ways, so the prior's
kept tokens must too, in a left-padded batch as for the prompt alone (docs/design.md §1, §3.3)."""

import pytest
import torch

import pnd
from pnd.testing import tiny_inputs, tiny_model
from pnd.testing.reference import full_logits, greedy

PROMPTS = ("Describe the video.", "a")  # the second row is left-padded in the batch
# PaliGemma 2: a Gemma 2 language model, sliding-window layers (a window shorter than the prompts)
PALIGEMMA2 = dict(text_model_type="gemma2", sliding_window=6, query_pre_attn_scalar=16,
                  layer_types=["sliding_attention", "full_attention"])


@pytest.fixture(params=["paligemma", "paligemma2"])
def family(request, tiny):
    """(model, processor) of PaliGemma and of PaliGemma 2 (sliding-window layers)."""
    return tiny("paligemma") if request.param == "paligemma" else tiny_model("paligemma", **PALIGEMMA2)


def _inputs(processor, prompts, seed=0):
    inputs = tiny_inputs(processor, "paligemma", prompts, seed=seed, image=True)
    inputs.pop("labels")  # PaliGemma's processor adds them for training
    return inputs


def _logprobs(logits):
    return torch.log_softmax(logits.float(), -1)


def test_paligemma_generate_gives_a_padded_row_what_it_gives_the_prompt_alone(family):
    """The premise of the contract: transformers' own PaliGemma gives a left-padded row the prompt alone's result."""
    model, processor = family
    batch, alone = _inputs(processor, PROMPTS), _inputs(processor, PROMPTS[1:], seed=1)
    assert not batch["attention_mask"][1].all() and not batch["token_type_ids"].any()  # padded; all prefix
    plain = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False)
    together, apart = model.generate(**batch, **plain), model.generate(**alone, **plain)
    assert together[1, -6:].tolist() == apart[0, -6:].tolist()
    torch.testing.assert_close(_logprobs(model(**batch).logits[1, -1]), _logprobs(model(**alone).logits[0, -1]),
                               atol=1e-5, rtol=0)


def test_prior_of_a_padded_row_is_the_prompt_alones_with_a_bidirectional_prefix(family):
    """pnd's prior of the padded row = its prior of the prompt alone = a forward of the prompt alone with the image
    masked and the kept prefix bidirectional (token_type_ids 0); a causal prior over the kept tokens is farther off
    than the tolerance, so a prior that loses the bidirectionality fails here."""
    model, processor = family
    batch, alone = _inputs(processor, PROMPTS), _inputs(processor, PROMPTS[1:], seed=1)
    reference = _logprobs(full_logits(model, alone, alone["input_ids"], prior=True)[0])
    padded, single = pnd.prior_logits(model, **batch)[1], pnd.prior_logits(model, **alone)[0]
    torch.testing.assert_close(_logprobs(padded), reference, atol=1e-5, rtol=0)
    torch.testing.assert_close(_logprobs(single), reference, atol=1e-5, rtol=0)
    causal = {k: v for k, v in alone.items() if k != "token_type_ids"}  # PaliGemma's forward is causal without them
    assert (_logprobs(full_logits(model, causal, alone["input_ids"], prior=True)[0]) - reference).abs().max() > 1e-3


def test_prompt_without_token_types_gets_a_causal_prior(tiny):
    """Without token_type_ids PaliGemma's forward is causal; so is pnd's prior then (padded row included)."""
    model, processor = tiny("paligemma")
    batch = {k: v for k, v in _inputs(processor, PROMPTS).items() if k != "token_type_ids"}
    reference = _logprobs(full_logits(model, batch, batch["input_ids"], prior=True))
    torch.testing.assert_close(_logprobs(pnd.prior_logits(model, **batch)), reference, atol=1e-5, rtol=0)


def test_continuing_a_conversation_is_refused(tiny):
    """The returned cache holds the first prompt's bidirectional prefix, which the prior cannot tell from later text."""
    model, processor = tiny("paligemma")
    inputs = _inputs(processor, PROMPTS[:1])
    first = pnd.attach(model).generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)],
                                       return_dict_in_generate=True)
    whole = torch.cat([first.sequences, torch.tensor([[11]])], 1)
    with pytest.raises(ValueError, match="prefix LM.*without past_key_values"):
        model.generate(input_ids=whole, attention_mask=torch.ones_like(whole), past_key_values=first.past_key_values,
                       max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])


def test_paligemma2_greedy_decoding_of_a_padded_batch_equals_brute_force():
    """PaliGemma 2's sliding-window layers: the prefix stays bidirectional beyond the window (transformers' block
    overlay is or-ed after it), in the prior's prefill and through the decoding steps."""
    model, processor = tiny_model("paligemma", **PALIGEMMA2)
    inputs = _inputs(processor, PROMPTS)
    eos = model.generation_config.eos_token_id
    out = pnd.attach(model).generate(**inputs, max_new_tokens=6, min_new_tokens=6, do_sample=False,
                                     logits_processor=[pnd.PriorNormalized(0.7)])
    assert out[:, -6:].tolist() == greedy(model, inputs, 0.7, 6, banned=[eos])[0].tolist()
