"""Gemma 3n (`pnd/architectures/prefix_lm.py`'s notes): audio in the prompt is hidden from the prior with the image;
normalized decoding refuses audio inputs (alpha > 0), plain decoding takes them."""

import numpy as np
import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.testing import random_video
from pnd.testing.reference import full_logits, visual_positions

STEPS = 6


def _audio_inputs(processor, seeds=(0, 1)):
    """Image + audio prompts (the second shorter, so left-padded), each with half a second of noise."""
    texts = []
    for text in ("Describe the video.", "a"):
        prompt = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}], add_generation_prompt=True)
        texts.append(prompt.replace("<image_soft_token>", "<image_soft_token> <audio_soft_token>"))
    audio = [np.random.RandomState(s).randn(8000).astype(np.float32) * 0.1 for s in seeds]
    images = [[random_video(s, frames=1)[0]] for s in seeds]
    return processor(text=texts, images=images, audio=audio, return_tensors="pt", padding=True)


def test_the_prior_hides_the_audio_block_too(tiny):
    """What the processor reports replacing covers the audio block (`\\n\\n<start_of_audio>…<end_of_audio>\\n\\n`),
    as the reference reads it; `prior_logits` then equals the forward with image and audio masked."""
    model, processor = tiny("gemma3n")
    inputs = _audio_inputs(processor)
    ids = inputs["input_ids"]
    expansion = architecture_for(model).expansion(model, ids, inputs["attention_mask"])
    assert torch.equal(expansion, visual_positions(model, ids) & inputs["attention_mask"].bool())
    assert (ids[expansion] == model.config.audio_token_id).sum() == 8  # both rows' audio tokens
    reference = torch.log_softmax(full_logits(model, inputs, ids, prior=True), -1)
    got = torch.log_softmax(pnd.prior_logits(model, **inputs).float(), -1)
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=0)


def test_audio_is_refused_at_alpha_above_zero_and_plain_at_zero(tiny):
    """generate refuses audio inputs at alpha > 0 (naming them) and is plain generate at alpha = 0."""
    model, processor = tiny("gemma3n")
    inputs = _audio_inputs(processor)
    pnd.attach(model)
    with pytest.raises(ValueError, match="does not support audio inputs.*input_features"):
        model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.7)])
    plain = dict(max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False)
    assert torch.equal(model.generate(**inputs, **plain, logits_processor=[pnd.PriorNormalized(0.0)]),
                       model.generate(**inputs, **plain))
