"""Prompts with more than one visual input (docs/design.md §1: the prior hides every visual expansion of the prompt):
two images, two videos, an image and a video, visuals in two turns of a chat, and a left-padded batch whose rows hold
different numbers of images. pnd's greedy tokens and scores equal the brute-force reference's, and alpha 0 is plain
`generate`, bit for bit. The reference reads the expansion from its own patterns (`visual_positions`), which must
agree with the processor's record of what it replaced.
"""

import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.io.prompts import images_for
from pnd.testing import random_video
from pnd.testing.reference import greedy, processor_expansion, visual_positions

from helpers import DEVICE, assert_scores_close

STEPS = 4
ALPHA = 0.8


def chat(processor, *turns):
    """A chat prompt: each turn a list of "image", "video" or text, the user's and the assistant's in turn."""
    messages = [{"role": ("user", "assistant")[i % 2],
                 "content": [{"type": item} if item in ("image", "video") else {"type": "text", "text": item}
                             for item in turn]} for i, turn in enumerate(turns)]
    return processor.apply_chat_template(messages, add_generation_prompt=True)


def image(seed):
    return random_video(seed, frames=1, size=64)[0]


CASES = {
    "two images": (("llava_onevision", "qwen2_vl", "gemma3", "idefics3", "internvl", "paligemma"),
                   lambda p: ([chat(p, ["image", "image", "Which is brighter?"])], {"images": [[image(0), image(1)]]})),
    "two videos": (("llava_onevision", "qwen2_vl", "qwen3_vl", "internvl", "smolvlm"),
                   lambda p: ([chat(p, ["video", "video", "Compare them."])],
                              {"videos": [random_video(0), random_video(1)]})),
    "image and video": (("llava_onevision", "qwen2_vl", "internvl"),
                        lambda p: ([chat(p, ["image", "video", "Is the image in the video?"])],
                                   {"images": [[image(2)]], "videos": [random_video(3)]})),
    "two turns": (("llava_onevision", "qwen2_vl", "gemma3"),
                  lambda p: ([chat(p, ["image", "What is it?"], ["A square."], ["image", "And this one?"])],
                             {"images": [[image(4), image(5)]]})),
    "rows of 1 and 2 images": (("llava_onevision", "qwen2_vl", "gemma3", "internvl", "idefics3"),
                               lambda p: ([chat(p, ["image", "Describe it."]), chat(p, ["image", "image", "Same?"])],
                                          {"images": [[image(6)], [image(7), image(8)]]})),
}
PARAMS = [(case, model_type) for case, (families, _) in CASES.items() for model_type in families]


@pytest.mark.parametrize("case, model_type", PARAMS)
def test_every_visual_of_the_prompt_is_hidden_and_decoding_equals_the_reference(tiny, case, model_type):
    model, processor = tiny(model_type)
    texts, visuals = CASES[case][1](processor)
    if "images" in visuals:
        visuals["images"] = images_for(processor, visuals["images"])
    inputs = processor(text=texts, return_tensors="pt", padding=True, **visuals).to(DEVICE)
    _, replaced = processor_expansion(processor, texts, **visuals)
    assert torch.equal(visual_positions(model, inputs["input_ids"]), replaced.to(DEVICE))  # the reference's reading
    pnd.attach(model)
    placeholders = list(architecture_for(model).placeholder_ids(model.config))  # a generated one: a visual input
    run = dict(max_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True, output_scores=True,
               suppress_tokens=placeholders)
    plain = model.generate(**inputs, **run)
    neutral = model.generate(**inputs, **run, logits_processor=[pnd.PriorNormalized(0.0)])
    assert torch.equal(neutral.sequences, plain.sequences)
    assert all(torch.equal(a, b) for a, b in zip(neutral.scores, plain.scores))
    out = model.generate(**inputs, **run, min_new_tokens=STEPS, logits_processor=[pnd.PriorNormalized(ALPHA)])
    eos = model.generation_config.eos_token_id
    tokens, scores = greedy(model, inputs, ALPHA, STEPS, banned=[*(eos if isinstance(eos, list) else [eos]),
                                                                  *placeholders])
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1]:], tokens)
    for got, want in zip(out.scores, scores):
        assert_scores_close(got, want)
