"""MiniCPM-V 4.6 and 4.7: the prior hides the image ids, the `<image>…</image>` and `<slice>…</slice>` blocks and
the newlines between slice rows (pnd/architectures/minicpmv.py), on Qwen3.5's hybrid language model (4.7: canvas
M-RoPE).

The decoding-mode tests (greedy, beam search, sampling, batches, alpha=0, image prompts) run in `test_exactness.py`,
the mask against the processor's offsets and the processor being required in `test_families.py`. Here: what is particular to MiniCPM-V.
"""

import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.testing import random_video, tiny_inputs
from pnd.testing.reference import greedy, placeholders_only_removed, processor_expansion, visual_positions

from helpers import PROMPTS

STEPS = 6
FAMILIES = ("minicpmv4_6", "minicpmv4_7")


@pytest.mark.parametrize("model_type", FAMILIES)
@pytest.mark.parametrize("image", [False, True])
def test_minicpmv_decoding_fails_with_a_placeholder_only_prior(tiny, model_type, image):
    """pnd's tokens are the reference's; a prior that cuts out the placeholders only (the image id, the block and
    slice delimiters and the newlines between slice rows stay) decodes other tokens."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=image)
    out = pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                                     logits_processor=[pnd.PriorNormalized(1.0)])
    eos = [model.generation_config.eos_token_id]
    right, _ = greedy(model, inputs, 1.0, STEPS, banned=eos)
    wrong, _ = greedy(model, inputs, 1.0, STEPS, banned=eos, prior=placeholders_only_removed)
    assert torch.equal(out[:, -STEPS:], right)
    assert not torch.equal(right, wrong)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_minicpmv_mask_of_several_visuals_in_one_prompt(tiny, model_type):
    """Two sliced images (ids 0 and 1) and a video of sliced frames in one prompt, text between them: the mask is what
    the processor replaced, and the template's text between the visuals stays visible."""
    model, processor = tiny(model_type)
    content = [{"type": "image"}, {"type": "text", "text": "the cat"}, {"type": "image"}, {"type": "video"},
               {"type": "text", "text": "describe the video."}]
    text = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
    ids, replaced = processor_expansion(processor, [text], images=[[random_video(0, 1)[0], random_video(1, 1)[0]]],
                                        videos=[random_video(2, frames=2, size=112)])  # 2x2 slices of 56 pixels
    assert (ids == processor.tokenizer.convert_tokens_to_ids("<slice>")).sum() == 2 * 4 + 2 * 4
    assert torch.equal(architecture_for(model).expansion(model, ids), replaced)
    assert torch.equal(visual_positions(model, ids), replaced)
    assert "the cat" in processor.tokenizer.decode(ids[~replaced])


@pytest.mark.parametrize("model_type", FAMILIES)
def test_minicpmv_prompt_of_unknown_expansion_is_an_error(tiny, model_type):
    model, processor = tiny(model_type)
    ids = tiny_inputs(processor, model_type, PROMPTS[:1], image=True)["input_ids"]
    slice_end = processor.tokenizer.convert_tokens_to_ids("</slice>")
    last = int((ids[0] == slice_end).nonzero()[-1, 0])
    with pytest.raises(ValueError, match="do not pair up"):  # truncated inside its last slice
        pnd.prior_logits(model, input_ids=ids[:, :last])
    stray = processor.tokenizer(["user <|image_pad|> describe it."], return_tensors="pt").input_ids
    with pytest.raises(ValueError, match="outside a MiniCPM-V 4.[67] <image>…</image> or <slice>…</slice> block"):
        pnd.prior_logits(model, input_ids=stray)
