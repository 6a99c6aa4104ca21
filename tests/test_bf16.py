"""docs/design.md §3.2 in bfloat16: pnd's normalized decoding on a bf16 model equals the brute-force reference
(`pnd.testing.reference`) run on the same bf16 model, within a tolerance that comes from bf16's own floor, measured
here.

The floor is what bf16 costs with no pnd at all: plain `generate` against plain from-scratch forwards without a
cache (`forced_scores` at alpha 0), teacher-forced on generate's own tokens, the largest gap between their
log-probabilities (finite entries, every step). It is never taken below one bf16 step at the largest |logit|
(`pnd.testing.check.rounding_step`): a CPU often computes the cached and the uncached forward of a tiny model bit
for bit alike (a gap of 0), while pnd's prior pass, a forward over other key slots than the reference's masked one,
rounds some logits one step apart. pnd's scores are then compared with the reference's, teacher-forced on pnd's own
tokens (a flipped near-tie does not end the comparison), on a bf16 copy of a few tiny models: attention only
(LLaVA-OneVision; Qwen2-VL, M-RoPE; Gemma 3, sliding window and bidirectional image block), recurrent layers
(Qwen3.5), an expansion the processor reports (SmolVLM); greedy, and sampling on one. An error below the floor (a
subtraction rounded to bf16) is the float32 suite's to find.
"""

import copy

import pytest
import torch
from transformers import BatchFeature

import pnd
from pnd.testing import random_video, tiny_inputs
from pnd.testing.check import SLACK, K, largest_gap, rounding_step
from pnd.testing.reference import forced_scores

from helpers import DEVICE, PROMPTS

STEPS = 6
ALPHA = 0.5
CASES = [("llava_onevision", "greedy"), ("qwen2_vl", "greedy"), ("qwen3_5", "greedy"), ("gemma3", "greedy"),
         ("smolvlm", "greedy"), ("llava_onevision", "sample")]


def bf16_copy(tiny, model_type):
    """A bfloat16 copy of the cached tiny model (which stays as it is), attached with its processor."""
    model, processor = tiny(model_type)
    pnd.detach(model)  # the copy takes none of pnd's state (the fixture binds its processor again when asked)
    model = copy.deepcopy(model).to(torch.bfloat16)
    return pnd.attach(model, processor), processor


@pytest.mark.parametrize("model_type, mode", CASES)
def test_bf16_normalized_scores_match_the_reference_within_bf16s_floor(tiny, model_type, mode):
    model, processor = bf16_copy(tiny, model_type)
    try:
        assert model.dtype == torch.bfloat16
        assert {p.dtype for p in model.parameters() if p.is_floating_point()} == {torch.bfloat16}
        inputs = BatchFeature(dict(tiny_inputs(processor, model_type, PROMPTS))).to(DEVICE, torch.bfloat16)
        length = inputs["input_ids"].shape[1]
        kwargs = {"greedy": {"do_sample": False}, "sample": {"do_sample": True, "top_k": 0, "top_p": 1.0}}[mode]

        def run(**extra):
            torch.manual_seed(3)
            return model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, return_dict_in_generate=True,
                                  **kwargs, **extra)

        # bf16's floor: plain generate (its raw logits) against plain from-scratch forwards on its own tokens
        plain = run(output_logits=True)
        logits = torch.stack(plain.logits, 1).float()
        plain_scores = torch.log_softmax(logits, -1)
        measured = largest_gap(plain_scores, forced_scores(model, inputs, plain.sequences[:, length:], 0.0))
        floor = max(measured, rounding_step(logits, torch.bfloat16))
        spread = float((plain_scores.amax(-1) - plain_scores.amin(-1)).min())  # log-probabilities' range in a step
        assert floor < 0.05 * spread, f"bf16's floor {floor:.3g} is not small beside the scores' range {spread:.3g}"

        out = run(output_scores=True, logits_processor=[pnd.PriorNormalized(ALPHA)])
        scores = torch.stack(out.scores, 1)
        reference = forced_scores(model, inputs, out.sequences[:, length:], ALPHA)
        gap, tolerance = largest_gap(scores, reference), K * floor + SLACK
        assert gap <= tolerance, f"pnd's bf16 scores are {gap:.3g} from the reference's (floor {floor:.3g})"
        # not vacuous: at the first step (the same prompt for both) normalizing moves the scores far past the tolerance
        assert largest_gap(scores[:, 0], plain_scores[:, 0]) > 10 * tolerance
    finally:
        pnd.detach(model)


@pytest.mark.parametrize("model_type", ["lfm3_vl", "kimi_k25"])
def test_entry_points_that_build_inputs_give_a_bf16_model_bf16_pixels(tiny, model_type):
    """`CaptionScorer` and `generate_captions` run the processor themselves: its float32 pixels must take the model's
    dtype (these towers take no other than their weights'), as `inputs.to(model.device, model.dtype)` would."""
    from pnd.decoding.captioning import generate_captions

    model, processor = bf16_copy(tiny, model_type)
    try:
        scores = pnd.CaptionScorer(model, processor).score([random_video(0)], ["a red circle"])
        captions = generate_captions(model, processor, [random_video(0)], alpha=0.5, max_new_tokens=2)
        assert torch.isfinite(scores).all() and len(captions) == 1
    finally:
        pnd.detach(model)


def test_caption_scorer_gives_fuyu_its_patches_as_pixel_values(tiny):
    """Fuyu's processor returns its patches as `image_patches` unless asked for `pixel_values`; the model takes both,
    so the scorer's float32 `image_patches` escaped the pixel inputs' dtype (a bf16 model crashed) and the reference's
    pixel keys (`pnd check` showed Fuyu's scorer row 1.4 nats off). The scorer now asks for `pixel_values`."""
    model, processor = bf16_copy(tiny, "fuyu")
    try:
        scorer = pnd.CaptionScorer(model, processor, modality="image")
        inputs = scorer.prompt_inputs(random_video(0)[0])
        assert "image_patches" not in inputs and inputs["pixel_values"].dtype == torch.bfloat16
        assert torch.isfinite(scorer.score([random_video(0)[0]], ["a red circle"])).all()
    finally:
        pnd.detach(model)
