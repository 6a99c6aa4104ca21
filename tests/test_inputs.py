"""docs/design.md §3.7: inputs of the wrong kind get an error naming the problem and the fix; numeric scalars of
numpy and torch are numbers."""

import numpy as np
import pytest
import torch

import pnd
from pnd.attachment import is_attached
from pnd.testing import random_video


@pytest.mark.parametrize("alpha", [np.float32(0.5), np.float64(0.5), np.int64(1), torch.tensor(0.5),
                                   torch.tensor(0.5, dtype=torch.bfloat16), torch.tensor(0)])
def test_numpy_and_torch_scalars_are_numbers(alpha):
    normalizer = pnd.PriorNormalized(alpha, plausibility=np.float32(0.25))
    assert type(normalizer.alpha) is float and normalizer.alpha == float(alpha)
    assert type(normalizer.plausibility) is float and normalizer.plausibility == 0.25


@pytest.mark.parametrize("alpha", [np.bool_(True), torch.tensor(True), torch.tensor([0.5]), np.float32("nan")])
def test_bools_arrays_and_nan_are_still_refused(alpha):
    with pytest.raises(ValueError, match=r"alpha must be a finite number in \[0, 1\]"):
        pnd.PriorNormalized(alpha)


def test_a_string_where_a_list_is_expected(tiny):
    model, processor = tiny("llava_onevision")
    scorer = pnd.CaptionScorer(model, processor)
    video = random_video(0)
    with pytest.raises(TypeError, match=r"captions must be a list, got the str 'a red circle': pass \['a red circle'\]"):
        scorer.score([video], "a red circle")
    with pytest.raises(TypeError, match=r"videos must be a list, got the str 'clip.mp4'"):
        scorer.score("clip.mp4", ["a red circle"])
    with pytest.raises(TypeError, match="captions must be a list"):
        scorer.score_prompt(scorer.prompt_inputs(video), "a red circle")
    with pytest.raises(TypeError, match="A caption must be a str, got int"):
        scorer.score([video], [3])


def test_a_video_without_frames(tiny):
    model, processor = tiny("llava_onevision")
    empty = random_video(0)[:0]
    with pytest.raises(ValueError, match=r"video has 0 frames: pass at least one frame.*read_video"):
        pnd.CaptionScorer(model, processor).score([empty], ["a red circle"])
    from pnd.decoding.captioning import generate_captions

    with pytest.raises(ValueError, match="video has 0 frames"):
        generate_captions(pnd.attach(model), processor, [random_video(0), empty], alpha=0.5)


@pytest.mark.parametrize("frames", [0, -1, "0", 2.5])
def test_lmms_eval_refuses_max_frames_num_below_one_at_construction(frames):
    pytest.importorskip("lmms_eval")
    from pnd.integrations.lmms_eval import PndHf

    with pytest.raises(ValueError, match=r"max_frames_num must be a positive integer.*got"):
        PndHf(pretrained="/nonexistent/never/loaded", max_frames_num=frames)


def test_a_prefill_strategy_in_the_processor_slot_says_to_name_it(tiny):
    model, _ = tiny("llava")
    with pytest.raises(TypeError, match=r"pnd.attach\(model, prefill='own_call'\)"):
        pnd.attach(model, "own_call")
    assert not is_attached(model)


def _nan_video(seed=0):
    video = random_video(seed).float()
    video[0, 0, 0, 0] = float("nan")
    return video


def test_a_non_finite_video_is_refused_and_leaves_the_scorer_as_it_was(tiny):
    """A NaN video is an error naming it, before any forward; a scorer that met one (first call: no caption prior
    cached yet) scores the next videos as a fresh scorer does. So do pixel inputs of a prompt built elsewhere."""
    model, processor = tiny("llava_onevision")
    captions, good = ["a red circle", "a blue square moving"], random_video(1)
    fresh = pnd.CaptionScorer(model, processor).score([good], captions)
    scorer = pnd.CaptionScorer(model, processor)
    with pytest.raises(ValueError, match=r"videos\[1\]: video holds non-finite values \(NaN or inf\)"):
        scorer.score([good, _nan_video()], captions)
    inputs = processor(text=[scorer.prompt_text], videos=[random_video(2)], return_tensors="pt")
    inputs["pixel_values_videos"][0, 0, 0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="CaptionScorer: pixel_values_videos holds non-finite values"):
        scorer.score_prompt(inputs, captions)
    assert torch.equal(scorer.score([good], captions), fresh) and torch.isfinite(fresh).all()


@pytest.mark.parametrize("video, message", [
    (random_video(0).float() / 255, r"videos\[0\]: video holds floats in \[0, 1\]: pnd takes pixel values in 0-255"),
    (random_video(0).float() / 127.5 - 1, r"videos\[0\]: video holds values from -1 to 1: pass pixel values in 0-255"),
    (random_video(0)[None], r"videos\[0\]: video has shape \(1, 4, 3, 56, 56\): pass one video as a \(frames, 3, H,"),
])
def test_videos_in_a_layout_or_range_pnd_does_not_take_are_refused(tiny, video, message):
    """Frames as tensors: uint8 or float in 0-255 (the same video: scores within the processor's resampling of one
    dtype or the other); floats in [0, 1] (which the processor would rescale to a black video), normalized frames
    and a batch dimension are errors that say what to pass."""
    model, processor = tiny("llava_onevision")
    scorer = pnd.CaptionScorer(model, processor)
    uint8 = random_video(0)
    scores = [scorer.score([v], ["a red circle"]) for v in (uint8, uint8.float(), torch.zeros_like(uint8))]
    torch.testing.assert_close(scores[1], scores[0], atol=0.01, rtol=0)
    assert (scores[2] - scores[0]).abs().max() > 0.1  # a black video scores otherwise
    with pytest.raises(ValueError, match=message):
        scorer.score([video], ["a red circle"])


def test_a_caption_longer_than_the_models_positions_is_refused(tiny):
    model, processor = tiny("llava_onevision")
    scorer = pnd.CaptionScorer(model, processor)
    limit = model.config.text_config.max_position_embeddings
    long = " ".join(["red"] * limit)
    with pytest.raises(ValueError, match=rf"Caption 1 has \d+ tokens: .* more than the model's {limit} "
                                         r"\(max_position_embeddings\)"):
        scorer.score([random_video(0)], ["a red circle", long])


@pytest.mark.parametrize("alpha", [0.5, 0.0])
def test_generate_refuses_nan_pixels_and_video_tokens_without_pixels(tiny, alpha):
    """At alpha > 0, before any work: non-finite pixel values, and a prompt whose video tokens came without their
    pixels (the model would caption a video it never got); alpha = 0 stays plain generate."""
    from pnd.testing import tiny_inputs

    model, processor = tiny("llava_onevision")
    pnd.attach(model)
    inputs = tiny_inputs(processor, "llava_onevision")
    kwargs = dict(max_new_tokens=2, logits_processor=[pnd.PriorNormalized(alpha)])
    nan = dict(inputs, pixel_values_videos=inputs["pixel_values_videos"].clone())
    nan["pixel_values_videos"][0, 0, 0, 0, 0] = float("nan")
    no_pixels = {k: v for k, v in inputs.items() if k != "pixel_values_videos"}
    if alpha == 0:
        model.generate(**nan, **kwargs)
        return
    with pytest.raises(ValueError, match="generate: pixel_values_videos holds non-finite values"):
        model.generate(**nan, **kwargs)
    with pytest.raises(ValueError, match="The prompt holds image/video tokens but generate got none of"):
        model.generate(**no_pixels, **kwargs)


@pytest.fixture
def overflowing_features():
    """A tiny LLaVA-OneVision whose visual features hold inf (a float16 vision tower that overflowed) from finite
    pixels; its own model: a hook stays on it."""
    from pnd.testing import tiny_model

    model, processor = tiny_model("llava_onevision")

    def overflow(module, args, output):
        output = output.clone()
        output[..., 0, :] = float("inf")
        return output
    hook = model.model.multi_modal_projector.register_forward_hook(overflow)
    return model, processor, hook


@pytest.mark.parametrize("prefill", ["auto", "own_call"])
def test_generate_refuses_a_conditioned_pass_with_inf_visual_features(overflowing_features, prefill):
    """Every token of the row is NaN then (0 x inf in attention), the text before the video too, which the prior
    reuses: the prior cannot equal the kept-tokens reference, so generate refuses before its first token (packed or
    own-call prefill); plain generate (alpha = 0) decodes as transformers does."""
    from pnd.testing import tiny_inputs

    model, processor, _ = overflowing_features
    inputs = tiny_inputs(processor, "llava_onevision")
    with torch.no_grad():
        assert model(**inputs).logits.isnan().all()  # the whole row, not just the visual slots
    pnd.attach(model, prefill=prefill)
    model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.0)])
    with pytest.raises(ValueError, match=r"generate: the model's forward over the prompt and its visual inputs gave "
                                         r"NaN or inf logits .* Load the model in bfloat16 or float32"):
        model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])


def test_caption_scorer_refuses_inf_visual_features_and_keeps_nothing(overflowing_features):
    model, processor, hook = overflowing_features
    scorer = pnd.CaptionScorer(model, processor)
    with pytest.raises(ValueError, match=r"CaptionScorer: the model's forward .* gave NaN or inf logits"):
        scorer.score([random_video(0)], ["a red circle", "a blue square"])
    hook.remove()
    fresh = pnd.CaptionScorer(model, processor)
    video = random_video(1)
    assert torch.equal(scorer.score([video], ["a red circle", "a blue square"]),
                       fresh.score([video], ["a red circle", "a blue square"]))
