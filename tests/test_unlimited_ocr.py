"""Unlimited-OCR (`pnd/architectures/unlimited_ocr.py`): transformers' mask for its reference sliding-window attention
(R-SWA) reads the 2-D attention mask at (cache index + the window's offset), the prompt's keys included; pnd's paired
steps read it at the prompt's slots. The checks fail when that repair is removed (`pnd._compat.masks.shifted_window_mask`
left out) and when the cache returned loses the prompt's length.

The tiny model's window is 3 generated tokens, so the 6 steps here slide it.
"""

import pytest
import torch
from accelerate.hooks import ModelHook, add_hook_to_module

import pnd
from pnd._compat import masks
from pnd.testing import tiny_inputs, tiny_model
from pnd.testing.reference import full_logits, greedy

from helpers import PROMPTS, assert_scores_close

STEPS = 6


def _unrepaired(monkeypatch):
    """Leave pnd's paired steps with transformers' own mask (the 2-D mask as given)."""
    monkeypatch.setattr(masks, "shifted_window_mask", lambda mask, prompt, offset: mask)


def _normalized(model, inputs, alpha=0.7):
    return model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, output_scores=True,
                          return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(alpha)])


def _gap(got, want) -> float:
    """The largest difference over the tokens `got` allows (min_new_tokens bans the end-of-sequence token)."""
    return max(float((g - w)[torch.isfinite(g)].abs().max()) for g, w in zip(got, want))


@pytest.mark.parametrize("repaired", [True, False])
def test_prior_equals_the_reference_once_the_window_slides(monkeypatch, repaired):
    """An unpadded prompt: the prior's hidden visual slots stay where they are (its greedy equals the brute-force
    reference, which writes R-SWA out for the whole sequence); unrepaired, they move onto other slots once the window
    slides, and the scores leave the reference after step `sliding_window + 1`."""
    model, processor = tiny_model("unlimited_ocr")
    inputs = tiny_inputs(processor, "unlimited_ocr", PROMPTS[:1], image=True)
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    if not repaired:
        _unrepaired(monkeypatch)
    out = _normalized(pnd.attach(model, processor), inputs)
    window = model.config.get_text_config(decoder=True).sliding_window
    assert _gap(out.scores[: window + 1], scores) < 1e-4  # the same until the window slides
    if repaired:
        assert torch.equal(out.sequences[:, -STEPS:], tokens)
        for got, want in zip(out.scores, scores):
            assert_scores_close(got, want)
    else:
        assert not torch.equal(out.sequences[:, -STEPS:], tokens) or _gap(out.scores, scores) > 1e-3


def test_the_cache_generate_returns_keeps_the_prompt_apart_from_the_window():
    """The conditioned rows' cache that pnd's `generate` returns splits the prompt from the window as transformers'
    does (`PairedCache.conditioned`): one more step on it equals the reference's from-scratch forward."""
    model, processor = tiny_model("unlimited_ocr")
    inputs = tiny_inputs(processor, "unlimited_ocr", PROMPTS[:1], image=True)
    out = _normalized(pnd.attach(model, processor), inputs)
    layer = out.past_key_values.layers[0]
    assert layer.prefill_length == inputs["input_ids"].shape[1] and layer.keys.shape[2] < STEPS
    sequence = out.sequences
    step = dict(input_ids=sequence[:, -1:], attention_mask=torch.ones_like(sequence), use_cache=True,
                position_ids=torch.tensor([[sequence.shape[1] - 1]]))
    with torch.no_grad():
        logits = model(**step, past_key_values=out.past_key_values).logits[:, -1]
    torch.testing.assert_close(logits, full_logits(model, inputs, sequence, prior=False), atol=1e-4, rtol=0)


def test_the_repair_wraps_a_device_hook_on_the_text_model():
    """A device map that makes the whole text model one block (accelerate's hook is its instance `forward`): the
    repair wraps the hook (the prior still equals the reference once the window slides), and detach leaves the hook."""
    model, processor = tiny_model("unlimited_ocr")
    inputs = tiny_inputs(processor, "unlimited_ocr", PROMPTS[:1], image=True)
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=[model.generation_config.eos_token_id])
    text_model = model.model.language_model
    add_hook_to_module(text_model, ModelHook())
    hook = vars(text_model)["forward"]
    out = _normalized(pnd.attach(model, processor), inputs)
    assert torch.equal(out.sequences[:, -STEPS:], tokens)
    for got, want in zip(out.scores, scores):
        assert_scores_close(got, want)
    pnd.detach(model)
    assert vars(text_model)["forward"] is hook


def test_detach_removes_the_repair():
    model, processor = tiny_model("unlimited_ocr")
    text_model = model.model.language_model
    pnd.attach(model, processor)
    assert "forward" in vars(text_model)
    pnd.detach(model)
    assert "forward" not in vars(text_model)
