"""`check_frames` checks lists of frames as it checks tensors, refuses booleans and integers outside 0-255, and the image
scorer checks its images by the same rules."""

import numpy as np
import pytest
import torch
from PIL import Image

import pnd
from pnd.testing import random_video
from pnd.validation import check_frames

CLIP = random_video(0)  # (4, 3, 56, 56) uint8


def sixteen_bit(shape, dtype=np.uint16):
    """Zeros but one pixel at 65535: a 16-bit frame's range."""
    values = np.zeros(shape, dtype)
    values.flat[0] = 65535
    return values


@pytest.mark.parametrize("video, message", [
    ([frame.float() / 255 for frame in CLIP], r"videos\[1\]: video holds floats in \[0, 1\].*\* 255"),
    (sixteen_bit((4, 3, 8, 8)), r"videos\[1\]: video holds uint16 values from 0 to 65535: pass pixel values in 0-255"),
    (torch.from_numpy(sixteen_bit((4, 8, 8, 3), np.int32)), "int32 values from 0 to 65535"),
    ([sixteen_bit((8, 8, 3))] * 3, "uint16 values from 0 to 65535"),
    (torch.full((4, 3, 8, 8), -1, dtype=torch.int8), "int8 values from -1 to -1"),
    (CLIP > 127, r"videos\[1\]: video holds booleans"),
    ([Image.new("RGB", (56, 56)), Image.new("RGB", (64, 56))],
     r"videos\[1\]: video has frames of different shapes 56x56x3, 56x64x3: give every frame .* the same size"),
])
def test_refused_frames_name_the_video_and_the_fix(video, message):
    with pytest.raises(ValueError, match=message):
        check_frames(video, "videos[1]")


@pytest.mark.parametrize("video", [CLIP, CLIP.float(), CLIP.long(), list(CLIP), tuple(CLIP.float()),
                                   [frame.permute(1, 2, 0).numpy() for frame in CLIP],
                                   [Image.fromarray(frame.permute(1, 2, 0).numpy()) for frame in CLIP]])
def test_pixel_values_in_0_255_are_taken(video):
    check_frames(video, "videos[1]")


@pytest.mark.parametrize("image, message", [
    (CLIP[0].float() / 255, r"image holds floats in \[0, 1\]"),
    (torch.full((3, 56, 56), 1000, dtype=torch.int32), "image holds int32 values from 1000 to 1000"),
    (Image.fromarray(np.full((56, 56), 30000, np.uint16)), "image holds uint16 values from 30000 to 30000"),
    (np.zeros((56, 56, 3), dtype=bool), "image holds booleans"),
])
def test_the_image_scorer_checks_its_images(tiny, image, message):
    """Only videos were checked: a float [0, 1] image was rescaled once more by the processor, to a black one."""
    model, processor = tiny("llava")
    scorer = pnd.CaptionScorer(model, processor, modality="image")
    with pytest.raises(ValueError, match=message):
        scorer.prompt_inputs(image)
    with pytest.raises(ValueError, match=r"videos\[0\]: " + message):
        scorer.score([image], ["a red circle"])


def test_the_image_scorer_takes_uint8_float_and_pil_images(tiny):
    model, processor = tiny("llava")
    scorer = pnd.CaptionScorer(model, processor, modality="image")
    reference = scorer.prompt_inputs(CLIP[0])["pixel_values"]
    pil = scorer.prompt_inputs(Image.fromarray(CLIP[0].permute(1, 2, 0).numpy()))["pixel_values"]
    assert torch.equal(pil, reference)
    assert scorer.prompt_inputs(CLIP[0].float())["pixel_values"].shape == reference.shape
