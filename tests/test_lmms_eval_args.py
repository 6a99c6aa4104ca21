"""pnd's lmms-eval models and their model_args, built in process as lmms-eval builds them: a method at its neutral
setting scores as the plain model, a prior the scorer lacks scores as the brute-force reference, and a setting every
document would fail on is refused when the model is built, naming the model_arg."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

import pnd
from pnd.integrations.lmms_eval import PndHf
from pnd.testing import tiny_model
from pnd.testing.reference import contrast_prior, forced_scores, method_forced

QUESTION, CHOICES = "Is there a cat? Please answer yes or no.", [" yes", " no maybe"]
IMAGE = Image.fromarray(np.random.default_rng(3).integers(0, 256, (40, 48, 3), dtype=np.uint8))


def saved(folder, model_type):
    model, processor = tiny_model(model_type)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    """A tiny LLaVA-OneVision on disk: (its folder, the model loaded with plain transformers, its processor, inputs)."""
    folder = saved(tmp_path_factory.mktemp("llava") / "model", "llava_onevision")
    model, processor = AutoModelForImageTextToText.from_pretrained(folder).eval(), AutoProcessor.from_pretrained(folder)
    prompt = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"},
                                                                        {"type": "text", "text": QUESTION}]}],
                                           add_generation_prompt=True)
    return folder, model, processor, processor(text=[prompt], images=[[IMAGE]], return_tensors="pt")


def losses(lm):
    lm.task_dict = {"t": {"test": [{"image": IMAGE}]}}
    requests = [SimpleNamespace(args=(QUESTION, c, lambda doc: [doc["image"]], 0, "t", "test")) for c in CHOICES]
    return [loss for loss, _ in lm.loglikelihood(requests)]


def reference_losses(model, processor, scores_of):
    """-(mean of a choice's scores of its tokens), `scores_of(ids)` the per-step scores (steps, vocabulary)."""
    out = []
    for choice in CHOICES:
        ids = processor.tokenizer(choice, add_special_tokens=False).input_ids
        with torch.no_grad():
            out.append(-float(scores_of(torch.tensor([ids]))[0][range(len(ids)), ids].mean()))
    return out


@pytest.mark.parametrize("settings", [{"method": "vcd", "alpha": "0"}, {"method": "icd", "alpha": "0"},
                                      {"method": "m3id", "forgetting_rate": "0"},
                                      {"method": "pai", "alpha": "0", "gamma": "1"},
                                      {"method": "only", "alpha1": "0", "alpha2": "0"},
                                      {"method": "vista", "steer_strength": "0"},
                                      {"alpha": "0", "prior": "blank"}, {"alpha": "0", "prior": "inputs"}],
                         ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_a_method_at_its_neutral_setting_scores_as_the_plain_model(llava, settings):
    folder, model, processor, inputs = llava
    want = reference_losses(model, processor, lambda ids: forced_scores(model, inputs, ids, 0))
    np.testing.assert_allclose(losses(PndHf(pretrained=folder, device="cpu", **settings)), want, atol=1e-4)


@pytest.mark.parametrize("prior", ["noise", "blank"])
def test_cpn_with_a_vision_tower_prior_scores_as_the_reference(llava, prior):
    """prior noise (VCD's noised pixels) or blank (all-zero pixels after the processor) under cpn, alpha 0.5."""
    folder, model, processor, inputs = llava
    pixels = inputs["pixel_values"]
    pixels = pnd.vcd_noise(pixels, 500, 0) if prior == "noise" else torch.zeros_like(pixels)
    contrast = {**inputs, "pixel_values": pixels}
    want = reference_losses(model, processor, lambda ids: method_forced(model, inputs, ids, lambda c, p, t: c - 0.5 * p,
                                                                        contrast_prior(contrast)))
    np.testing.assert_allclose(losses(PndHf(pretrained=folder, device="cpu", alpha=0.5, prior=prior)), want, atol=1e-4)


@pytest.mark.parametrize("settings, message", [
    ({"prior": "inputs"}, r"model_args prior=inputs needs a contrast prompt .* use method=icd"),
    ({"method": "pai", "start_layer": "5"}, r"method=pai .*acts in no layer of this model's 2 decoder layers "
                                            r"\(start_layer=5, end_layer=32\): choose layers in \[0, 2\)"),
    ({"method": "only", "layer": "4"}, r"method=only .*acts in no layer .*\(layer=4\)"),
    ({"method": "pai", "start_layer": "0", "attn_implementation": "eager"}, r"method=pai .*attn_implementation='sdpa'"),
    ({"dtype": "bf17"}, r"dtype 'bf17' is not a dtype name: pass auto .*bfloat16 \(or bf16\), float16 \(fp16\)"),
    ({"device": f"cuda:{torch.cuda.device_count()}"}, r"--device cuda:\d: this machine has \d CUDA device.* device="),
], ids=["prior-inputs", "pai-layers", "only-layer", "eager", "dtype", "device"])
def test_a_setting_every_document_would_fail_on_is_refused_when_built(llava, settings, message):
    with pytest.raises(ValueError, match=message):
        PndHf(pretrained=llava[0], **{"device": "cpu", **settings})


def test_dtype_aliases_load_that_dtype(llava):
    assert PndHf(pretrained=llava[0], device="cpu", dtype="bf16").model.dtype == torch.bfloat16


def test_a_prior_through_the_vision_tower_is_refused_on_a_qformer_family_when_built(tmp_path):
    with pytest.raises(ValueError, match=r"method=vcd .*cannot run on blip-2.*Here: method=cpn with prior=masked"):
        PndHf(pretrained=saved(tmp_path / "model", "blip-2"), device="cpu", method="vcd")


def test_prior_text_on_sliding_window_layers_is_refused_when_built(tmp_path):
    """M3ID's default prior is 'text', which Gemma 3's sliding-window layers cannot run: every document failed."""
    with pytest.raises(ValueError, match=r"method=m3id .*prior='text' is not supported on gemma3_text \(sliding-window "
                                         r"attention\).*\(model_args prior=masked\)"):
        PndHf(pretrained=saved(tmp_path / "model", "gemma3"), device="cpu", method="m3id")
    PndHf(pretrained=tmp_path / "model", device="cpu", method="m3id", prior="masked")  # as it says
