"""A CPU guard against device bugs: pnd's decoding and scoring paths build no tensor without `device=`.

On a CPU a tensor built without `device=` is on the right device by accident; on the user's GPU it meets CUDA tensors
and fails, or it costs a host-to-device copy in every step. The guard is a `TorchFunctionMode` that sees every tensor
factory call (`torch.tensor`, `zeros`, `arange`, ...) and records those made without `device=` by code in pnd's own
files (its frame's file). Factory calls of transformers' (its beam search, some families' encoders) and torch's own
are not pnd's and are not recorded; `*_like` and `tensor.new_*` calls take their tensor's device and are not
factories here. The inputs a test builds (`pnd.testing`, the user's side) are not pnd's decoding either.

Example of what it catches (`test_the_guard_catches_a_planted_device_less_tensor`): a `torch.arange(n)` in a
decoding step.
"""

import inspect

import pytest
import torch
from torch.overrides import TorchFunctionMode

import pnd
from pnd.testing import random_video

from helpers import PROMPTS, pnd_call_site, tiny_inputs

CHECKED = ("_compat", "architectures", "decoding", "interventions", "scoring", "attachment.py",  # pnd's model side
           "validation.py")
FACTORIES = {torch.tensor, torch.as_tensor, torch.scalar_tensor, torch.zeros, torch.ones, torch.empty, torch.full,
             torch.arange, torch.linspace, torch.eye, torch.rand, torch.randn, torch.randint, torch.randperm}


class DeviceLessTensors(TorchFunctionMode):
    """Records `file:line function` for each tensor factory called without `device=` from pnd's model side."""

    def __init__(self):
        super().__init__()
        self.found: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None:
            site = pnd_call_site(inspect.currentframe().f_back, CHECKED)
            if site:
                self.found.add(f"{site} {func.__name__}")
        return func(*args, **kwargs)


# One family per path through pnd's code: packed prefill, M-RoPE, recurrent layers (kept tokens alone), bidirectional
# visual blocks, chunked attention in the prompt's slots, slot-anchored indexers, relative position bias, R-SWA
# windows, Kosmos-2's positions, a generate that runs the language model's, a prefix LM, the generic finder.
FAMILIES = ("llava_onevision", "qwen2_vl", "qwen3_5", "gemma3", "llama4", "minimax_m3_vl", "inkling2", "unlimited_ocr",
            "kosmos-2", "blip-2", "paligemma", "smolvlm")
STEPS = 3
BEAM_CRASHES = ("llama4",)  # beam search crashes inside transformers itself (docs/families.md)
ONE_PROMPT = ("minimax_m3_vl",)  # refuses padded batches at alpha > 0 (its indexer's blocks shift with padding)


def decode_every_way(model, inputs):
    """generate in each mode and with each method on `inputs`."""
    runs = [(pnd.PriorNormalized(0.5), {}), (pnd.PriorNormalized(0.5), {"do_sample": True, "top_k": 5}),
            (pnd.M3ID(prior="masked"), {})]
    if model.config.model_type not in BEAM_CRASHES:
        runs.append((pnd.PriorNormalized(0.5), {"num_beams": 2}))
    if not pnd.architectures.architecture_for(model).embeds_prompt and model.config.model_type != "kosmos-2":
        runs.append((pnd.PriorNormalized(0.5, prior="noise", combine="contrastive"), {}))  # VCD
    for processor, kwargs in runs:
        model.generate(**inputs, max_new_tokens=STEPS, logits_processor=[processor], **{"do_sample": False, **kwargs})


@pytest.mark.parametrize("model_type", FAMILIES)
def test_pnd_builds_no_device_less_tensor(tiny, model_type):
    model, processor = tiny(model_type)
    pnd.attach(model, processor)
    one = tiny_inputs(processor, model_type)
    inputs = one if model_type in ONE_PROMPT else tiny_inputs(processor, model_type, PROMPTS)
    with DeviceLessTensors() as guard:
        decode_every_way(model, inputs)
        pnd.prior_logits(model, **one)
        pnd.CaptionScorer(model, processor).score_prompt(one, ["a red circle", "a dark square"])
    assert sorted(guard.found) == [], sorted(guard.found)


def test_the_static_cache_path_builds_no_device_less_tensor(tiny):
    model, processor = tiny("llava_onevision")
    pnd.attach(model)
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    with DeviceLessTensors() as guard:
        model.generate(**inputs, max_new_tokens=STEPS, do_sample=False, cache_implementation="static",
                       logits_processor=[pnd.PriorNormalized(0.5)])
    assert sorted(guard.found) == [], sorted(guard.found)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_the_interventions_build_no_device_less_tensor(tiny, model_type):
    """PAI, ONLY and VISTA (issue 45) in greedy, beam and static-cache decoding, the packed prefill and M-RoPE."""
    model, processor = tiny(model_type)
    pnd.attach(model)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    with DeviceLessTensors() as guard:
        for make in (lambda: pnd.PAI(start_layer=0), pnd.ONLY, pnd.VISTA):
            for kwargs in ({}, {"num_beams": 2}, {"cache_implementation": "static"}):
                model.generate(**inputs, max_new_tokens=STEPS, do_sample=False, logits_processor=[make()], **kwargs)
    assert sorted(guard.found) == [], sorted(guard.found)


def test_caption_scorer_on_a_video_builds_no_device_less_tensor(tiny):
    model, processor = tiny("llava_onevision")
    with DeviceLessTensors() as guard:
        scores = pnd.CaptionScorer(model, processor).score([random_video(0)], ["a red circle", "a dark square"])
    assert sorted(guard.found) == [] and scores.device == torch.device("cpu")  # results: on the CPU by design


def test_the_guard_catches_a_planted_device_less_tensor(tiny, monkeypatch):
    """A decoding step that builds `torch.arange(n)` (no `device=`) in pnd's own file is reported with its place."""
    import pnd.decoding.steps as steps

    planted = {"torch": torch, "decode_step": steps._decode_step}
    source = "def _decode_step(*args):\n    torch.arange(3)\n    return decode_step(*args)\n"
    exec(compile(source, steps.__file__, "exec"), planted)  # code that runs as if written in pnd/decoding/steps.py
    monkeypatch.setattr(steps, "_decode_step", planted["_decode_step"])
    model, processor = tiny("llava_onevision")
    pnd.attach(model)
    with DeviceLessTensors() as guard:
        model.generate(**tiny_inputs(processor, "llava_onevision"), max_new_tokens=STEPS, do_sample=False,
                       logits_processor=[pnd.PriorNormalized(0.5)])
    assert sorted(guard.found) == ["decoding/steps.py:2 arange"]
