"""The per-token view (pnd.explain, CaptionScorer.token_scores) equals the brute-force reference, step by step."""

import pytest
import torch

import pnd
from pnd.explain import explain
from pnd.testing import random_video, tiny_inputs

from reference import full_logits, greedy

STEPS = 6
ALPHA = 0.7
TOL = dict(abs=1e-4)


def reference_steps(model, inputs, generated):
    """(log P(.|v), log P(.)) at each step of `generated` (1, steps): two from-scratch forwards per step."""
    prompt = inputs["input_ids"]
    conditional, prior = [], []
    for k in range(generated.shape[1]):
        sequence = torch.cat([prompt, generated[:, :k]], 1)
        conditional.append(torch.log_softmax(full_logits(model, inputs, sequence, prior=False)[0], -1))
        prior.append(torch.log_softmax(full_logits(model, inputs, sequence, prior=True)[0], -1))
    return torch.stack(conditional), torch.stack(prior)


def assert_matches_reference(tokens, conditional, prior, alpha):
    """Every number of a per-token view against reference log-probabilities of the same steps."""
    normalized = conditional - alpha * prior
    shift = torch.log_softmax(normalized, -1) - conditional
    views = {"conditional": conditional, "prior": prior, "normalized": normalized}
    for step, token in enumerate(tokens):
        w = token.token_id
        assert token.conditional == pytest.approx(float(conditional[step, w]), **TOL)
        assert token.prior == pytest.approx(float(prior[step, w]), **TOL)
        assert token.normalized == pytest.approx(float(normalized[step, w]), **TOL)
        assert token.shift == pytest.approx(float(shift[step, w]), **TOL)
        for name, view in views.items():
            listed = token.top[name]
            want = view[step].topk(len(listed)).values
            assert [a.value for a in listed] == pytest.approx(want.tolist(), **TOL)  # the k best values
            assert [a.value for a in listed] == pytest.approx([float(view[step, a.token_id]) for a in listed], **TOL)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "llava"])
def test_explain_equals_brute_force(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type)
    result = explain(pnd.attach(model), processor, inputs, alpha=ALPHA, max_new_tokens=STEPS, top_k=4)
    for tokens, alpha in ((result.plain, 0.0), (result.normalized, ALPHA)):
        ref_tokens, _ = greedy(model, inputs, alpha, STEPS)
        chosen = [t.token_id for t in tokens]
        assert chosen == ref_tokens[0, : len(chosen)].tolist() and len(chosen) >= 1
        conditional, prior = reference_steps(model, inputs, ref_tokens[:, : len(chosen)])
        assert_matches_reference(tokens, conditional, prior, ALPHA)
    plain, normalized = ([t.token_id for t in tokens] for tokens in (result.plain, result.normalized))
    parted = next(k for k, (a, b) in enumerate(zip(plain, normalized)) if a != b)  # the tiny models part here
    assert result.parted_at == parted
    assert result.plain_text == processor.tokenizer.decode(plain, skip_special_tokens=True).strip()


def test_explanation_is_json_ready(tiny):
    import json

    model, processor = tiny("llava_onevision")
    result = explain(pnd.attach(model), processor, tiny_inputs(processor, "llava_onevision"), alpha=1.0,
                     max_new_tokens=3, top_k=2, plausibility=0.1)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["alpha"] == 1.0 and data["plausibility"] == 0.1
    assert set(data["normalized"][0]["top"]) == {"conditional", "prior", "normalized"}
    assert len(data["plain"][0]["top"]["prior"]) == 2


def test_explain_refuses_what_it_cannot_do(tiny):
    model, processor = tiny("llava_onevision")
    with pytest.raises(ValueError, match="pnd.attach"):
        explain(model, processor, tiny_inputs(processor, "llava_onevision"))
    with pytest.raises(ValueError, match="one prompt"):
        explain(pnd.attach(model), processor, tiny_inputs(processor, "llava_onevision", ("a", "b")))


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_caption_scorer_token_scores_equal_brute_force(tiny, model_type):
    model, processor = tiny(model_type)
    scorer = pnd.CaptionScorer(model, processor, alpha=0.8, reduction="sum")
    video, caption = random_video(3), "a red circle moves left"
    tokens = scorer.token_scores(video, caption, top_k=3)
    ids = scorer.caption_ids(caption)
    assert [t.token_id for t in tokens] == ids and "".join(t.text for t in tokens).strip() == caption
    prompt = scorer.prompt_inputs(video)
    conditional, prior = reference_steps(model, prompt, torch.tensor([ids]))
    assert_matches_reference(tokens, conditional, prior, 0.8)
    total = scorer.score([video], [caption])[0, 0]  # the caption's score is the sum of its tokens'
    assert sum(t.normalized for t in tokens) == pytest.approx(float(total), abs=1e-3)
