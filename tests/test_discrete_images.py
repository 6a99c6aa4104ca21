"""Families whose images are discrete tokens of a VQ model, written between begin and end markers (Chameleon): the
prior hides the whole span, markers included (docs/design.md §1)."""

import pytest
import torch

import pnd
from pnd.io.prompts import video_prompt
from pnd.testing import random_video

from reference import full_logits, placeholder_positions

MARKERS = {"chameleon": ("<racm3:break>", "<eoss>")}


@pytest.mark.parametrize("model_type", sorted(MARKERS))
def test_prior_hides_the_vq_span_and_its_markers(tiny, model_type):
    """The expansion holds the span's markers; the prior is the brute-force one (every token of the span and its
    markers masked out); a prior that sees the markers (the image placeholders alone masked) differs."""
    model, processor = tiny(model_type)
    pnd.attach(model, processor)
    inputs = processor(text=[video_prompt(processor, "Describe the image.", "image")],
                       images=[random_video(0, frames=1, size=64)[0]], return_tensors="pt")
    ids, expansion = inputs["input_ids"], inputs["visual_expansion_mask"].bool()
    markers = torch.isin(ids, torch.tensor(processor.tokenizer.convert_tokens_to_ids(list(MARKERS[model_type]))))
    assert markers.sum() == 2 and (expansion & markers).sum() == 2
    prior = pnd.prior_logits(model, **inputs).float()
    torch.testing.assert_close(prior, full_logits(model, inputs, ids, prior=True), atol=1e-4, rtol=0)
    positions = pnd.decoding.prior.default_position_ids(model, **inputs)
    seen = inputs["attention_mask"] * ~placeholder_positions(model, ids)
    with torch.no_grad():
        leaky = model(input_ids=ids, attention_mask=seen, position_ids=positions).logits[:, -1].float()
    assert not torch.allclose(prior, leaky, atol=1e-3)
