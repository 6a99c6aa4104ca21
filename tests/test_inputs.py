"""docs/design.md §3.7: inputs of the wrong kind get an error naming the problem and the fix; numeric scalars of
numpy and torch are numbers."""

import numpy as np
import pytest
import torch

import pnd
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
    from pnd.captioning import generate_captions

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
    assert not hasattr(model, "_pnd")
