"""The brute-force reference of PAI, ONLY and VISTA (pnd/testing/reference/interventions.py) checked on its own: its
eager attention is the model's, neutral settings are the plain forward, each intervention changes the logits, a
left-padded row is the prompt alone, and at batch 1 it is mitigv's own PAI, ONLY and VISTA (their patched attention,
head selection, hooks and combinations)."""

import copy

import pytest
import torch
from mitigv.algorithms.only import ONLY
from mitigv.algorithms.pai import PAI
from mitigv.backends.generic import GenericMitigator

from pnd.testing.reference import (
    decoder_layers,
    eager_attention,
    full_logits,
    method_greedy,
    only_combine,
    only_contrast,
    pai_combine,
    pai_conditioned,
    steering_vectors,
    text_only_tokens,
    vista_conditioned,
    visual_positions,
)
from pnd.testing.reference.interventions import deactivated_heads, pai_amplify

from helpers import PROMPTS, tiny_inputs, tiny_model


def generated(processor, rows):
    """Two text tokens appended to every row (the generated tokens of a from-scratch step)."""
    ids = processor.tokenizer.encode(" red blue", add_special_tokens=False)[:2]
    return torch.tensor([ids] * rows)


def batch(model_type, prompts=PROMPTS, **text):
    model, processor = tiny_model(model_type, **text)
    inputs = tiny_inputs(processor, model_type, prompts=prompts)
    return model, processor, inputs, torch.cat([inputs["input_ids"], generated(processor, len(prompts))], 1)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "qwen3_vl", "gemma3", "internvl", "llava",
                                        "paligemma"])
def test_eager_attention_is_the_models_attention(model_type):
    """With no edit, the edited copy's eager attention gives the model's own logits (a left-padded batch, generated
    tokens); the edits run in every decoder layer once per forward, on scores of the whole sequence, and the model
    itself keeps its attention (SDPA) and its hooks."""
    model, _, inputs, sequence = batch(model_type)
    plain = full_logits(model, inputs, sequence, prior=False)
    hooks = [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()]
    seen = []

    def before(layer, scores, visible):
        seen.append((layer, visible[:, 0, -1].sum(-1).tolist()))  # the last query's visible keys
        assert scores.shape[-2:] == visible.shape[-2:] == (sequence.shape[1],) * 2
        return scores

    with eager_attention(model, before=before) as edited:
        assert edited.config.get_text_config(decoder=True)._attn_implementation == "eager"
        eager = full_logits(edited, inputs, sequence, prior=False)
    assert [layer for layer, _ in seen] == list(range(len(decoder_layers(model)[1])))
    assert max(seen, key=lambda s: sum(s[1]))[1] == inputs["attention_mask"].sum(-1).add(2).tolist()  # full attention
    assert model.config.get_text_config(decoder=True)._attn_implementation == "sdpa"
    assert [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()] == hooks
    torch.testing.assert_close(eager, plain, atol=1e-5, rtol=0)


def test_neutral_settings_are_the_plain_forward():
    model, _, inputs, sequence = batch("llava_onevision", num_hidden_layers=4)
    plain = full_logits(model, inputs, sequence, prior=False)
    for neutral in (pai_conditioned(0.0, 0, 32), pai_conditioned(0.5, 4, 32), only_contrast(4)):  # no layer edited
        torch.testing.assert_close(neutral(model, inputs, sequence), plain, atol=1e-5, rtol=0)
    assert torch.equal(vista_conditioned(0.0)(model, inputs, sequence), plain)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_each_intervention_changes_the_logits_and_a_padded_row_is_its_prompt_alone(model_type):
    model, processor, inputs, sequence = batch(model_type)
    plain = full_logits(model, inputs, sequence, prior=False)
    for method in (pai_conditioned(0.5, 1, 32), only_contrast(0), only_contrast(1), vista_conditioned(0.1)):
        logits = method(model, inputs, sequence)
        assert (logits - plain).abs().amax(-1).min() > 1e-3  # every row
        for row, prompt in enumerate(PROMPTS):
            alone = tiny_inputs(processor, model_type, prompts=(prompt,), seed=row)
            alone_logits = method(model, alone, torch.cat([alone["input_ids"], generated(processor, 1)], 1))
            torch.testing.assert_close(logits[row : row + 1], alone_logits, atol=1e-5, rtol=0)
    assert inputs["attention_mask"][0].eq(0).any()  # the batch is left-padded


def image_prompt():
    """LLaVA-1.5 (a Llama text model, as mitigv's patched attention assumes) on one image prompt, unpadded."""
    model, processor = tiny_model("llava")
    inputs = tiny_inputs(processor, "llava", prompts=PROMPTS[1:])
    visual = visual_positions(model, inputs["input_ids"])[0].nonzero().flatten()
    assert torch.equal(visual, torch.arange(visual[0], visual[-1] + 1))  # one span, as mitigv takes it
    eager = copy.deepcopy(model)  # mitigv's attention reads an additive mask: eager
    eager.config.get_text_config(decoder=True)._attn_implementation = "eager"
    return model, eager, inputs, torch.tensor([[int(visual[0]), int(visual[-1]) + 1]])


def test_pai_is_mitigvs_on_llava():
    """At the prompt's step (the last prompt token is the newest query): the amplification is mitigv's
    `_amplify_attention_spans`, and the conditioned logits those of mitigv's patched attention in layers [1, 32)."""
    model, eager, inputs, spans = image_prompt()
    prompt = inputs["input_ids"]
    scores = torch.randn(1, 4, prompt.shape[1], prompt.shape[1])
    visible = torch.ones(1, 1, *scores.shape[-2:], dtype=torch.bool)
    ours = pai_amplify(scores, visible, visual_positions(model, prompt), prompt.shape[1], 0.5)
    assert torch.equal(ours, PAI._amplify_attention_spans(scores, spans, 0.5))

    pai = PAI.__new__(PAI)
    pai._attn_active, pai._img_spans, pai._attn_alpha = True, spans, 0.5
    for layer in decoder_layers(eager)[1][1:]:
        layer.self_attn.forward = pai._make_patched_forward(layer.self_attn)
    with torch.no_grad():
        theirs = eager(**inputs).logits[:, -1]
    reference = pai_conditioned(0.5, 1, 32)(model, inputs, prompt)
    assert (reference - full_logits(model, inputs, prompt, prior=False)).abs().max() > 1e-3
    torch.testing.assert_close(reference, theirs, atol=1e-5, rtol=0)


def test_only_is_mitigvs_on_llava():
    """ONLY's head selection is mitigv's `_compute_selected_mask` on the plain forward's attention; at the prompt's
    step the contrast logits are those of mitigv's masked forward (the heads chosen at the last prompt token)."""
    model, eager, inputs, spans = image_prompt()
    prompt = inputs["input_ids"]
    only = ONLY.__new__(ONLY)
    only._img_spans, only._mask_active, only._selected_mask = spans, False, None
    attention = decoder_layers(eager)[1][0].self_attn
    attention.forward = only._make_patched_forward(attention)
    with torch.no_grad():
        eager(**inputs)
    weights = only._last_attn
    visual = visual_positions(model, prompt)[0]
    selected = only._compute_selected_mask(weights, None)
    assert selected.any() and not selected.all()
    assert torch.equal(deactivated_heads(weights[0, :, -1], visual, ~visual), selected[0])

    only._mask_active, only._selected_mask = True, selected
    with torch.no_grad():
        theirs = eager(**inputs).logits[:, -1]
    assert (theirs - full_logits(model, inputs, prompt, prior=False)).abs().max() > 1e-3
    torch.testing.assert_close(only_contrast(0)(model, inputs, prompt), theirs, atol=1e-5, rtol=0)


def test_vista_is_mitigvs_hooks_on_its_vectors():
    """The steering vectors from plain calls of the model (the text-only prompt alone, unpadded), and the steered
    logits from mitigv's layer hooks (`_add_to_layer_output`)."""
    model, processor = tiny_model("qwen2_vl")
    inputs = tiny_inputs(processor, "qwen2_vl", prompts=PROMPTS[1:])
    prompt = inputs["input_ids"]
    kept = text_only_tokens(model, inputs, prompt)[0]
    with torch.no_grad():
        positive = model(**inputs, output_hidden_states=True).hidden_states
        negative = model(input_ids=prompt[kept][None], output_hidden_states=True).hidden_states
    vectors = steering_vectors(model, inputs)
    assert len(vectors) == len(decoder_layers(model)[1]) == len(positive) - 1
    for layer, vector in enumerate(vectors):
        torch.testing.assert_close(vector, positive[layer + 1][:, -1] - negative[layer + 1][:, -1], atol=1e-5, rtol=0)

    hooks = [layer.register_forward_hook(lambda m, a, out, v=v: GenericMitigator._add_to_layer_output(out, 0.1 * v))
             for layer, v in zip(decoder_layers(model)[1], vectors)]
    with torch.no_grad():
        theirs = model(**inputs).logits[:, -1]
    for hook in hooks:
        hook.remove()
    torch.testing.assert_close(vista_conditioned(0.1)(model, inputs, prompt), theirs, atol=1e-5, rtol=0)


def test_combinations_are_mitigvs():
    """On log-probabilities, PAI's guidance and plausibility cut and ONLY's fusion are mitigv's (which take logits)."""
    generator = torch.Generator().manual_seed(0)
    c, p = (torch.log_softmax(3 * torch.randn(3, 50, generator=generator), -1) for _ in range(2))
    guided = PAI._adaptive_plausibility(1.5 * (c - p) + p, c, 0.1)
    torch.testing.assert_close(pai_combine(1.5, 0.1)(c, p, 1), guided, rtol=0, atol=0)
    assert torch.equal(pai_combine(1.0, 0.1)(c, p, 1), c)  # gamma 1: no guidance, no cut
    assert torch.equal(pai_combine(1.5, 0.0)(c, p, 1), 1.5 * (c - p) + p)
    for gamma in (0.0, 0.5, 3.0):  # contrastive, mixed, collaborative rows
        torch.testing.assert_close(only_combine(3.0, 1.0, gamma)(c, p, 1), ONLY._fuse(c, p, 3.0, 1.0, gamma))


def test_method_greedy_takes_the_conditioned_logits():
    """`conditioned=` replaces the conditioned forward; VISTA's score is its steered log-probabilities alone."""
    model, processor = tiny_model("qwen2_vl")
    inputs = tiny_inputs(processor, "qwen2_vl")
    plain = method_greedy(model, inputs, 2, lambda c, p, t: c, None)
    neutral = method_greedy(model, inputs, 2, lambda c, p, t: c, None, conditioned=vista_conditioned(0.0))
    assert torch.equal(plain[0], neutral[0])
    steered = method_greedy(model, inputs, 2, lambda c, p, t: c, None, conditioned=vista_conditioned(0.1))
    assert not torch.equal(steered[1][0], plain[1][0])
    torch.testing.assert_close(steered[1][0], torch.log_softmax(vista_conditioned(0.1)(model, inputs,
                                                                                      inputs["input_ids"]), -1))
