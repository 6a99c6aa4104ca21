"""VCD, ICD and M3ID on pnd's paired engine (docs/methods.md) against brute-force references built from the papers'
formulas: at every step one from-scratch forward of the conditioned input and one of the contrast input (or prior)."""

import functools
import json
import math
from unittest import mock

import numpy as np
import PIL.Image
import pytest
import torch
from transformers import DynamicCache

import pnd
from pnd.architectures import architecture_for
from pnd.io.prompts import images_for, pixel_values_kwargs
from pnd.testing import TINY_ARCHITECTURES, random_video
from pnd.testing.reference import contrast_prior, masked_prior, method_forced, method_greedy, text_prior

from helpers import DEVICE, PROMPTS, assert_method_scores, eos, on_device, tiny_inputs

STEPS = 5
FAMILIES = ("llava_onevision", "qwen2_vl")  # a dense model, and M-RoPE (a contrast of another length moves positions)
GATE = 0.015  # the tiny models' max p_c is 0.009-0.019: this gate lets some steps through and stops others


# --- the papers' combinations, from log p_c (conditioned), log p_x (prior / contrast) and the step t (1 = first) ---
def prior_combine(alpha):  # BLiM
    return lambda c, p, t: c - alpha * p


def contrastive(alpha, beta=None):  # VCD, ICD: (1 + alpha) log p_c - alpha log p_d, cut where p_c < beta max p_c
    def combine(c, p, t):
        s = (1 + alpha) * c - alpha * p
        return s if beta is None else s.masked_fill(c.exp() < beta * c.exp().amax(-1, keepdim=True), -math.inf)
    return combine


def m3id(rate, gate):  # M3ID: w_t = exp(lambda t) - 1, only where max p_c < gate
    def combine(c, p, t):
        w = math.exp(rate * t) - 1
        return torch.where(c.exp().amax(-1, keepdim=True) < gate, c + w * (c - p), c)
    return combine


def run(model, inputs, processor, **kwargs):
    pnd.attach(model)
    kwargs.setdefault("do_sample", False)
    return model.generate(**inputs, max_new_tokens=STEPS, logits_processor=[processor], return_dict_in_generate=True,
                          output_scores=True, **kwargs)



def messages(prompt, kind="video"):
    return [{"role": "user", "content": [{"type": kind}, {"type": "text", "text": prompt}]}]


def icd(processor, model_type, prompts=PROMPTS):
    """ICD's contrast for `tiny_inputs(processor, model_type, prompts)` on any family: its videos or images, the
    instruction first; a processor that takes one video per call builds each row alone, left-padded."""
    from pnd.testing import ONE_VIDEO_PER_CALL, VIDEO_ARCHITECTURES, left_padded

    kind = "video" if model_type in VIDEO_ARCHITECTURES else "image"
    visuals = [random_video(i, frames=4 if kind == "video" else 1) for i in range(len(prompts))]
    rows = [(messages(p, kind), {"videos": [v]} if kind == "video" else {"images": [[v[0]]]})
            for p, v in zip(prompts, visuals)]
    current = pixel_values_kwargs(processor)  # Fuyu's pixel_values, not its deprecated image_patches
    if model_type in ONE_VIDEO_PER_CALL:
        return on_device(left_padded([pnd.icd_inputs(processor, m, **v, **current) for m, v in rows],
                                     processor.tokenizer.pad_token_id))
    together = {key: [x for _, v in rows for x in v[key]] for key in rows[0][1]}
    together["images"] = images_for(processor, together["images"]) if "images" in together else None
    return on_device(pnd.icd_inputs(processor, [m for m, _ in rows],
                                    **{k: v for k, v in together.items() if v is not None}, **current))


def noised(inputs, noise_step=500, seed=0):
    """VCD's noise on the pixel inputs; on Kosmos-2.5's flattened patches, on the pixels after each patch's row and
    column (image_processing_kosmos2_5.py)."""
    def noise(v):
        return pnd.vcd_noise(v, noise_step, seed)

    patches = {k: torch.cat([v[..., :2], noise(v[..., 2:])], -1) for k, v in inputs.items() if k == "flattened_patches"}
    return {**inputs, **{k: noise(v) for k, v in inputs.items() if k.startswith("pixel_values")}, **patches}


def assert_greedy(model, inputs, out, combine, prior):
    tokens, scores = method_greedy(model, inputs, STEPS, combine, prior, banned=eos(model))
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1] :], tokens)
    assert_method_scores(model, torch.stack(out.scores, 1), torch.stack(scores, 1))



# --- VCD's noise ---
def test_vcd_noise_is_the_diffusion_forward_process_at_noise_step():
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    abar = math.prod(1 - (1 / (1 + math.exp(-(-6 + 12 * i / 999))) * (0.5e-2 - 1e-5) + 1e-5) for i in range(501))
    eps = torch.randn(x.shape, generator=torch.Generator("cpu").manual_seed(7))
    torch.testing.assert_close(pnd.vcd_noise(x, 500, seed=7), math.sqrt(abar) * x + math.sqrt(1 - abar) * eps,
                               atol=1e-5, rtol=0)
    assert pnd.vcd_noise(x.bfloat16(), 500).dtype == torch.bfloat16
    assert not torch.equal(pnd.vcd_noise(x, 500, seed=0), pnd.vcd_noise(x, 500, seed=1))
    mitigv = pytest.importorskip("mitigv.perturbations")  # the packaged peer (VCD's reference indexing, abar[T])
    torch.manual_seed(3)
    assert torch.equal(mitigv.DiffusionNoisePerturbation(noise_step=500)(x), pnd.vcd_noise(x, 500, seed=3))


def test_vcd_noise_of_a_video_of_the_same_shape_is_drawn_once():
    """Issue 47: drawing VCD's noise costs more than the rest of its prefill's extra work; a video of the same shape
    and seed reuses the last draw, the same noise a fresh draw gives."""
    x = torch.randn(1, 3, 5, 7, generator=torch.Generator().manual_seed(2))
    abar = math.prod(1 - (1 / (1 + math.exp(-(-6 + 12 * i / 999))) * (0.5e-2 - 1e-5) + 1e-5) for i in range(101))
    eps = torch.randn(x.shape, generator=torch.Generator("cpu").manual_seed(4))
    with mock.patch("torch.randn", wraps=torch.randn) as draws:
        first, second = pnd.vcd_noise(x, 100, seed=4), pnd.vcd_noise(2 * x, 100, seed=4)
    assert draws.call_count == 1
    torch.testing.assert_close(first, math.sqrt(abar) * x + math.sqrt(1 - abar) * eps, atol=1e-5, rtol=0)
    torch.testing.assert_close(second, math.sqrt(abar) * 2 * x + math.sqrt(1 - abar) * eps, atol=1e-5, rtol=0)


@pytest.mark.parametrize("bad", [-1, 1000, 2.5, True, "500"])
def test_vcd_noise_step_is_checked(bad):
    with pytest.raises(ValueError, match="noise_step must be an integer in"):
        pnd.vcd_noise(torch.zeros(2), bad)
    with pytest.raises(ValueError, match="noise_step must be an integer in"):
        pnd.PriorNormalized(1.0, prior="noise", noise_step=bad)


def test_vcd_noise_takes_numpys_integers_and_checks_the_seeds_range():
    """np.int64(3) was refused as 'not an integer in [0, 1000)'; a seed past torch's range failed inside torch."""
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(5))
    assert torch.equal(pnd.vcd_noise(x, np.int64(3), seed=np.int64(9)), pnd.vcd_noise(x, 3, seed=9))
    assert repr(pnd.PriorNormalized(1.0, prior="noise", noise_step=np.int64(3))) == repr(
        pnd.PriorNormalized(1.0, prior="noise", noise_step=3))
    for seed in (2**64, -2**63 - 1):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[-2\*\*63, 2\*\*64\)"):
            pnd.vcd_noise(x, 3, seed=seed)


# --- combine="contrastive" and M3ID on pnd's own priors ---
@pytest.mark.parametrize("model_type", FAMILIES)
def test_contrastive_greedy_matches_brute_force(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    out = run(model, inputs, pnd.PriorNormalized(0.8, combine="contrastive", plausibility=0.1), min_new_tokens=STEPS)
    assert_greedy(model, inputs, out, contrastive(0.8, 0.1), masked_prior)


@pytest.mark.parametrize("model_type, prior, gate", [("llava_onevision", "text", 1.0), ("llava_onevision", "masked", GATE),
                                                     ("qwen2_vl", "text", 0.3),
                                                     ("paligemma", "text", 1.0)])  # a prefix LM: its answer causal
def test_m3id_greedy_matches_brute_force(tiny, model_type, prior, gate):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    out = run(model, inputs, pnd.M3ID(forgetting_rate=0.6, gate=gate, prior=prior), min_new_tokens=STEPS)
    assert_greedy(model, inputs, out, m3id(0.6, gate), text_prior if prior == "text" else masked_prior)


def test_m3id_changes_decoding_and_its_gate_matters(tiny):
    """Guard against vacuous references: the correction changes tokens, and the gate keeps some steps' rows as they
    are and lets others through."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    plain, _ = method_greedy(model, inputs, STEPS, prior_combine(0.0), text_prior, banned=eos(model))
    full, full_scores = method_greedy(model, inputs, STEPS, m3id(0.6, 1.0), text_prior, banned=eos(model))
    _, gated_scores = method_greedy(model, inputs, STEPS, m3id(0.6, GATE), text_prior, banned=eos(model))
    assert not torch.equal(plain, full)
    same = [torch.equal(a[row], b[row]) for a, b in zip(full_scores, gated_scores) for row in range(a.shape[0])]
    assert any(same) and not all(same)


def beam_check(model, inputs, out, combine, prior):
    """Each returned beam's score is the reference's per-step scores summed along it, over its length."""
    prompt_len = inputs["input_ids"].shape[1]
    for row in range(out.sequences.shape[0]):
        generated = out.sequences[row, prompt_len:]
        length = int((generated == eos(model)[0]).nonzero()[0, 0]) + 1 if (generated == eos(model)[0]).any() \
            else len(generated)
        scores = method_forced(model, inputs, generated[None, :length], combine, prior)[0]
        total = scores.gather(1, generated[:length, None]).sum()
        torch.testing.assert_close(out.sequences_scores[row], total / length, atol=2e-4, rtol=0)


def sampling_check(model, inputs, out, combine, prior):
    generated = out.sequences[:, inputs["input_ids"].shape[1] :]
    assert_method_scores(model, torch.stack(out.scores, 1), method_forced(model, inputs, generated, combine, prior))


BEAM = {"num_beams": 3, "num_return_sequences": 2, "length_penalty": 1.0}
SAMPLE = {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0, "min_new_tokens": STEPS}


@pytest.mark.parametrize("method", ["contrastive", "m3id"])
def test_beam_search_and_sampling_match_brute_force(tiny, method):
    model, processor = tiny("llava_onevision")
    one, batch = (tiny_inputs(processor, "llava_onevision", prompts) for prompts in (PROMPTS[:1], PROMPTS))
    if method == "contrastive":
        make, combine, prior = lambda: pnd.PriorNormalized(0.7, combine="contrastive"), contrastive(0.7), masked_prior
    else:
        make, combine, prior = lambda: pnd.M3ID(forgetting_rate=0.5, gate=1.0), m3id(0.5, 1.0), text_prior
    beam_check(model, one, run(model, one, make(), **BEAM), combine, prior)
    torch.manual_seed(3)
    sampling_check(model, batch, run(model, batch, make(), **SAMPLE), combine, prior)


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_contrastive_is_prior_at_alpha_over_one_plus_alpha(tiny, alpha):
    """docs/methods.md: contrastive alpha a ranks as prior alpha a / (1 + a) (greedy, beam search: the scores are
    (1 + a) times the prior's), and samples as it at temperature 1 / (1 + a)."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    contrastive_, prior_ = pnd.PriorNormalized(alpha, combine="contrastive"), pnd.PriorNormalized(alpha / (1 + alpha))
    for kwargs in ({}, BEAM):
        a, b = run(model, inputs, contrastive_, **kwargs), run(model, inputs, prior_, **kwargs)
        assert torch.equal(a.sequences, b.sequences)
        if kwargs:
            torch.testing.assert_close(a.sequences_scores, (1 + alpha) * b.sequences_scores, atol=1e-4, rtol=0)
        else:
            for x, y in zip(a.scores, b.scores):
                torch.testing.assert_close(x, (1 + alpha) * y, atol=1e-4, rtol=0)
    sampled = []
    for processor_, temperature in ((contrastive_, 1.0), (prior_, 1 / (1 + alpha))):
        torch.manual_seed(5)
        sampled.append(run(model, inputs, processor_, do_sample=True, top_k=0, temperature=temperature).sequences)
    assert torch.equal(*sampled)


@pytest.mark.parametrize("mode", ["greedy", "beam", "sample"])
def test_zero_weight_is_plain_generate(tiny, mode):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    kwargs = {"greedy": {}, "beam": {"num_beams": 3}, "sample": {"do_sample": True, "top_k": 20}}[mode]
    torch.manual_seed(0)
    plain = model.generate(**inputs, max_new_tokens=STEPS, return_dict_in_generate=True, output_scores=True,
                           **{"do_sample": False, **kwargs})
    processors = [(pnd.PriorNormalized(0.0, combine="contrastive"), {}), (pnd.M3ID(forgetting_rate=0), {}),
                  (pnd.PriorNormalized(0.0, prior="noise", plausibility=0.1), {}),  # VCD's and ICD's cut: the
                  (pnd.PriorNormalized(0.0, prior="inputs", plausibility=0.1),  # method's, nothing at alpha 0
                   {"prior_inputs": icd(processor, "llava_onevision")})]
    for processor_, extra in processors:
        torch.manual_seed(0)
        ours = run(model, inputs, processor_, **kwargs, **extra)
        assert torch.equal(plain.sequences, ours.sequences)
        assert all(torch.equal(a, b) for a, b in zip(plain.scores, ours.scores))


# --- contrast priors: prior="inputs" (ICD, any other prompt) and prior="noise" (VCD) ---
def text_only(processor, prompts):
    texts = [processor.apply_chat_template([{"role": "user", "content": [{"type": "text", "text": p}]}],
                                           add_generation_prompt=True) for p in prompts]
    return on_device(processor(text=texts, return_tensors="pt", padding=True))


def contrast_case(processor, model_type, inputs, kind):
    """(the PriorNormalized, generate's extra arguments, the reference's contrast inputs) of a contrast `kind`."""
    if kind == "noise":
        return pnd.PriorNormalized(1.0, prior="noise", combine="contrastive", plausibility=0.1), {}, noised(inputs)
    contrast = {"icd": lambda: icd(processor, model_type),  # longer than the prompt: the prompt gets padded
                "shorter": lambda: tiny_inputs(processor, model_type, ("a", "b c"), seed=5),  # other videos
                "text": lambda: text_only(processor, ("Describe it.", "what colour?"))}[kind]()
    return pnd.PriorNormalized(1.0, prior="inputs", combine="contrastive"), {"prior_inputs": contrast}, contrast


@pytest.mark.parametrize("model_type", FAMILIES)
@pytest.mark.parametrize("kind", ["icd", "shorter", "text", "noise"])
def test_contrast_greedy_matches_brute_force(tiny, model_type, kind):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    normalizer, extra, contrast = contrast_case(processor, model_type, inputs, kind)
    longer = contrast["input_ids"].shape[1] > inputs["input_ids"].shape[1]
    assert longer == (kind == "icd") and (kind != "noise" or contrast["input_ids"] is inputs["input_ids"])
    out = run(model, inputs, normalizer, min_new_tokens=STEPS, **extra)
    assert_greedy(model, inputs, out, contrastive(1.0, normalizer.plausibility), contrast_prior(contrast))
    assert out.past_key_values.get_seq_length() == out.sequences.shape[1] - 1  # the prompt as given, no padding


@pytest.mark.parametrize("model_type", TINY_ARCHITECTURES)
def test_vcd_and_icd_on_every_family(tiny, model_type):
    """VCD (the same prompts on noised pixels) and ICD (longer contrast prompts, the instruction first, through the
    vision tower again) on every family, greedy on a left-padded batch, against two from-scratch forwards per step.
    Families whose language model gets the prompt as embeddings (the Q-Former families) refuse them, named."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    contrast = icd(processor, model_type)
    # no plausibility cut: a token at its edge could fall either side by rounding (the cut is tested above)
    vcd, icd_ = (pnd.PriorNormalized(1.0, prior=p, combine="contrastive") for p in ("noise", "inputs"))
    if architecture_for(model).embeds_prompt:
        for normalizer, extra in ((vcd, {}), (icd_, {"prior_inputs": contrast})):
            with pytest.raises(ValueError, match="prior="):
                run(model, inputs, normalizer, **extra)
        return
    assert contrast["input_ids"].shape[1] > inputs["input_ids"].shape[1]
    banned = [*eos(model), *architecture_for(model).placeholder_ids(model.config)]  # a generated one is a visual input
    for normalizer, extra, reference in ((vcd, {}, noised(inputs)), (icd_, {"prior_inputs": contrast}, contrast)):
        out = run(model, inputs, normalizer, suppress_tokens=banned, **extra)
        tokens, scores = method_greedy(model, inputs, STEPS, contrastive(1.0), contrast_prior(reference), banned)
        assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1] :], tokens)
        got, want = torch.stack(out.scores, 1), torch.stack(scores, 1)
        banned_ids = torch.tensor(banned, device=DEVICE)
        assert torch.equal(torch.isfinite(got), torch.isfinite(want).index_fill(-1, banned_ids, False))
        torch.testing.assert_close(got[torch.isfinite(got)], want[torch.isfinite(got)], atol=2e-4, rtol=0)


@pytest.mark.parametrize("model_type", FAMILIES)
@pytest.mark.parametrize("kind", ["icd", "noise"])
def test_contrast_with_a_static_cache(tiny, model_type, kind):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    normalizer, extra, contrast = contrast_case(processor, model_type, inputs, kind)
    out = run(model, inputs, normalizer, min_new_tokens=STEPS, cache_implementation="static", **extra)
    assert_greedy(model, inputs, out, contrastive(1.0, normalizer.plausibility), contrast_prior(contrast))
    assert out.past_key_values.get_seq_length() == out.sequences.shape[1] - 1  # the prompt as given, no padding
    dynamic = run(model, inputs, normalizer, min_new_tokens=STEPS, **extra).past_key_values
    for static_layer, dynamic_layer in zip(out.past_key_values.layers, dynamic.layers):
        length = dynamic_layer.keys.shape[2]
        torch.testing.assert_close(static_layer.keys[:, :, :length], dynamic_layer.keys, atol=1e-4, rtol=0)


def test_lengths_count_from_the_prompt_as_given_where_the_contrast_is_longer(tiny):
    """ICD's contrast prompt is longer than the prompt, which pnd left-pads to its length: max_length and min_length
    still count from the prompt as given (the same tokens and scores as max_new_tokens and min_new_tokens, whose
    calls equal the brute-force reference above), and no_repeat_ngram_size, which would read the padding as text, is
    refused before any work."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    normalizer, extra, _ = contrast_case(processor, "llava_onevision", inputs, "icd")
    length = inputs["input_ids"].shape[1]
    by_new = run(model, inputs, normalizer, min_new_tokens=STEPS, **extra)
    by_length = model.generate(**inputs, max_length=length + STEPS, min_length=length + STEPS, do_sample=False,
                               logits_processor=[normalizer], return_dict_in_generate=True, output_scores=True, **extra)
    assert torch.equal(by_length.sequences, by_new.sequences)
    assert all(torch.equal(a, b) for a, b in zip(by_length.scores, by_new.scores, strict=True))
    with pytest.raises(ValueError, match=r"no_repeat_ngram_size=2 .* left-pads the prompt by \d+ slots"):
        run(model, inputs, normalizer, no_repeat_ngram_size=2, **extra)


def test_a_contrast_on_the_prompts_own_video_runs_the_vision_tower_once(tiny):
    """Issue 47: ICD's contrast on the prompt's own video (what `pnd.icd_inputs` builds) and ONLY's contrast (the prompt
    itself) take the vision tower's outputs that generate computed for the prompt: one pass of the tower per call, as
    plain generate makes. Another video, or beam search (the prompt's outputs repeated per beam), runs it again. Their
    tokens equal the brute-force reference's either way (test_vcd_and_icd_on_every_family, tests/test_interventions.py)."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    icd_ = pnd.PriorNormalized(1.0, prior="inputs", combine="contrastive")
    other_videos = tiny_inputs(processor, "llava_onevision", ("a", "b c"), seed=5)
    cases = [(icd_, {"prior_inputs": icd(processor, "llava_onevision")}, 1), (icd_, {"prior_inputs": other_videos}, 2),
             (pnd.ONLY(), {}, 1), (icd_, {"prior_inputs": icd(processor, "llava_onevision"), "num_beams": 2}, 2)]
    tower, calls = model.model.get_video_features, []

    @functools.wraps(tower)  # its signature: generate reads it
    def counted(*args, **kwargs):
        calls.append(1)
        return tower(*args, **kwargs)

    for processor_, extra, passes in cases:
        calls.clear()
        with mock.patch.object(model.model, "get_video_features", counted):
            run(model, inputs, processor_, **extra)
        assert len(calls) == passes, (processor_, extra.keys())


def test_contrast_priors_change_decoding(tiny):
    """Guard against a vacuous reference: ICD's, VCD's and pnd's masked prior each decode other tokens."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    priors = [masked_prior, contrast_prior(icd(processor, "llava_onevision")), contrast_prior(noised(inputs))]
    decoded = [method_greedy(model, inputs, STEPS, contrastive(1.0), prior)[0] for prior in priors]
    assert all(not torch.equal(a, b) for i, a in enumerate(decoded) for b in decoded[i + 1 :])


def test_contrast_beam_search_and_sampling_match_brute_force(tiny):
    model, processor = tiny("llava_onevision")
    one, batch = (tiny_inputs(processor, "llava_onevision", prompts) for prompts in (PROMPTS[:1], PROMPTS))
    make = functools.partial(pnd.PriorNormalized, 0.6, prior="inputs", combine="contrastive")
    contrast = icd(processor, "llava_onevision", PROMPTS[:1])
    beam_check(model, one, run(model, one, make(), prior_inputs=contrast, **BEAM), contrastive(0.6),
               contrast_prior(contrast))
    contrast = icd(processor, "llava_onevision")
    torch.manual_seed(3)
    out = run(model, batch, make(), prior_inputs=contrast, **SAMPLE)
    sampling_check(model, batch, out, contrastive(0.6), contrast_prior(contrast))
    _, _, noise = contrast_case(processor, "llava_onevision", one, "noise")
    beam_check(model, one, run(model, one, pnd.PriorNormalized(0.6, prior="noise"), **BEAM), prior_combine(0.6),
               contrast_prior(noise))


def test_icd_inputs_puts_the_instruction_first_in_the_user_text(tiny):
    _, processor = tiny("llava_onevision")
    conversation = messages("Describe the video.")
    contrast = pnd.icd_inputs(processor, conversation, instruction="Be vague.", videos=[random_video(0, frames=4)])
    text = processor.tokenizer.decode(contrast["input_ids"][0])
    plain = processor.tokenizer.decode(tiny_inputs(processor, "llava_onevision", PROMPTS[:1])["input_ids"][0])
    assert plain.replace("Describe the video.", "Be vague. Describe the video.") == text
    assert conversation == messages("Describe the video.")  # the caller's messages are left as they were
    image = PIL.Image.fromarray(random_video(1, frames=1)[0].permute(1, 2, 0).numpy())  # visuals in the messages
    inline = [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Describe."}]}]
    contrast = pnd.icd_inputs(processor, inline, instruction="Be vague.")
    plain = processor(text=[processor.apply_chat_template(inline, add_generation_prompt=True)], images=[image],
                      return_tensors="pt")
    assert processor.tokenizer.decode(contrast["input_ids"][0]) == processor.tokenizer.decode(
        plain["input_ids"][0]).replace("Describe.", "Be vague. Describe.")
    assert torch.equal(contrast["pixel_values"], plain["pixel_values"])
    for content in (None, ["Describe."]):  # a TypeError or AttributeError inside pnd
        with pytest.raises(ValueError, match="the user message's 'content' must be a text or a list of parts"):
            pnd.icd_inputs(processor, [{"role": "user", "content": content}])


def test_contrast_inputs_are_checked(tiny):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    contrast = icd(processor, "llava_onevision")
    pnd.attach(model)
    inputs_prior = pnd.PriorNormalized(1.0, prior="inputs")
    cases = [
        ({"logits_processor": [pnd.PriorNormalized(0.5)], "prior_inputs": contrast}, "only PriorNormalized.*'inputs'"),
        ({"prior_inputs": contrast}, "no PriorNormalized"),
        ({"logits_processor": [inputs_prior]}, "needs the contrast prompt"),
        ({"logits_processor": [inputs_prior], "prior_inputs": {k: v[:1] for k, v in contrast.items()}}, "one row per"),
        ({"logits_processor": [inputs_prior], "prior_inputs": contrast["input_ids"]}, "processor's outputs"),
        ({"logits_processor": [inputs_prior], "prior_inputs": {**contrast, "attention_mask": contrast[
            "attention_mask"].flip(1)}}, "end with padding"),
        ({"logits_processor": [inputs_prior], "prior_inputs": contrast, "past_key_values": model.generate(
            **inputs, max_new_tokens=1, return_dict_in_generate=True).past_key_values}, "does not continue a conversation"),
        ({"logits_processor": [inputs_prior], "prior_inputs": contrast, "position_ids": inputs["attention_mask"]},
         "leave position_ids out"),
        ({"logits_processor": [inputs_prior], "prior_inputs": {**contrast, "pixel_values_videos": contrast[
            "pixel_values_videos"] * float("nan")}}, "prior_inputs.*NaN|NaN.*prior_inputs"),
        ({"logits_processor": [pnd.PriorNormalized(1.0, prior="noise")], "pixel_values_videos": None}, "none of"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            model.generate(**{**inputs, **kwargs}, max_new_tokens=2)
    # no attention mask (None): every slot of the prompt attended, the padding pnd adds masked, as the reference has it
    alone = {k: v[:1] for k, v in tiny_inputs(processor, "llava_onevision", PROMPTS[:1]).items()}
    alone_contrast = icd(processor, "llava_onevision", PROMPTS[:1])
    out = run(model, {**alone, "attention_mask": None}, pnd.PriorNormalized(1.0, prior="inputs", combine="contrastive"),
              prior_inputs={**alone_contrast, "attention_mask": None}, min_new_tokens=STEPS)
    assert_greedy(model, alone, out, contrastive(1.0), contrast_prior(alone_contrast))
    with pytest.raises(ValueError, match="combine must be one of"):
        pnd.PriorNormalized(0.5, combine="vcd")
    with pytest.raises(ValueError, match="gate must be"):
        pnd.M3ID(gate=0)
    with pytest.raises(ValueError, match="M3ID's prior must be"):
        pnd.M3ID(prior="blank")


# --- the registry of methods and its front ends ---
@pytest.mark.parametrize("how", ["positional", "inputs=", "no attention_mask", "empty DynamicCache",
                                 "empty StaticCache"])
def test_contrast_rows_read_the_call_as_generate_does(tiny, how):
    """VCD, ICD and ONLY build their contrast rows from the call's arguments before generate reads them: the prompt
    given positionally or as `inputs=`, a left-padded batch without its attention mask (generate infers it from the
    padding token) and a new, empty cache object decode as the call by keyword with the mask does (whose steps the
    tests above and test_interventions.py check against brute force). They were refused, or attended the padding."""
    from transformers import StaticCache

    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    assert not inputs["attention_mask"].all()
    plain = {k: v for k, v in inputs.items() if k != "attention_mask"}
    assert torch.equal(model.generate(**plain, max_new_tokens=STEPS), model.generate(**inputs, max_new_tokens=STEPS))
    config = model.config.get_text_config(decoder=True)
    static = how == "empty StaticCache"
    for normalizer, extra in [contrast_case(processor, "llava_onevision", inputs, "noise")[:2],
                              contrast_case(processor, "llava_onevision", inputs, "icd")[:2], (pnd.ONLY(), {})]:
        want = run(model, inputs, normalizer, **extra, **({"cache_implementation": "static"} if static else {}))
        rest = {k: v for k, v in inputs.items() if k != "input_ids"}
        args, kwargs = {"positional": ((inputs["input_ids"],), rest),
                        "inputs=": ((), {**rest, "inputs": inputs["input_ids"]}),
                        "no attention_mask": ((), plain),
                        "empty DynamicCache": ((), {**inputs, "past_key_values": DynamicCache(config=config)}),
                        "empty StaticCache": ((), {**inputs, "past_key_values": StaticCache(
                            config=config, max_cache_len=inputs["input_ids"].shape[1] + STEPS)})}[how]
        got = model.generate(*args, **kwargs, **extra, max_new_tokens=STEPS, do_sample=False,
                             logits_processor=[normalizer], return_dict_in_generate=True, output_scores=True)
        assert torch.equal(got.sequences, want.sequences), normalizer
        for a, b in zip(got.scores, want.scores):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_m3id_takes_prior_inputs_in_python_not_from_the_front_ends():
    from pnd.decoding.methods import method

    assert pnd.M3ID(prior="inputs").prior == "inputs"  # generate(..., prior_inputs=...): tests/test_mitigv_peer.py
    with pytest.raises(ValueError, match="prior='inputs' needs generate"):
        method("m3id").processor(prior="inputs")


def test_registry_builds_each_papers_processor_with_its_defaults():
    from pnd.decoding.methods import METHODS, method

    assert sorted(METHODS) == ["cpn", "icd", "m3id", "only", "pai", "vcd", "vista"]
    assert repr(method("cpn").processor()) == repr(pnd.PriorNormalized(0.5))
    assert repr(method("vcd").processor()) == repr(pnd.PriorNormalized(1.0, prior="noise", plausibility=0.1,
                                                                        combine="contrastive", noise_step=500, seed=0))
    assert repr(method("icd").processor()) == repr(pnd.PriorNormalized(1.0, prior="inputs", plausibility=0.1,
                                                                        combine="contrastive"))
    assert repr(method("m3id").processor(gate="0.5")) == repr(pnd.M3ID(0.02, 0.5, prior="text"))
    assert method("icd").contrast_text("Describe.") == ("You are a confused object detector to provide a fuzzy "
                                                        "overview or impression of the image. Describe.")
    with pytest.raises(ValueError, match="has no setting 'alpha'; its settings"):
        method("m3id").processor(alpha=1)
    with pytest.raises(ValueError, match="noise_step must be of type int"):
        method("vcd").processor(noise_step="many")
    with pytest.raises(ValueError, match="Unknown decoding method 'dola'"):
        method("dola")


@pytest.mark.parametrize("name", ["vcd", "icd", "m3id"])
def test_generate_captions_runs_each_method(tiny, name):
    from pnd.decoding.captioning import generate_captions
    from pnd.io.prompts import video_prompt

    model, processor = tiny("llava_onevision")
    video = random_video(0, frames=4)
    settings = {"m3id": {"forgetting_rate": 0.6, "gate": 1.0}}.get(name, {})
    caption = generate_captions(pnd.attach(model), processor, [video], None, max_new_tokens=STEPS, method=name,
                                settings=settings)[0]
    inputs = on_device(processor(text=[video_prompt(processor, "Describe the video.")], videos=[video],
                                 return_tensors="pt"))
    combine, prior = {"vcd": (contrastive(1.0, 0.1), contrast_prior(noised(inputs))),
                      "icd": (contrastive(1.0, 0.1), contrast_prior(icd(processor, "llava_onevision", PROMPTS[:1]))),
                      "m3id": (m3id(0.6, 1.0), text_prior)}[name]
    tokens, _ = method_greedy(model, inputs, STEPS, combine, prior)
    tokens = tokens[0].tolist()
    tokens = tokens[: tokens.index(eos(model)[0]) + 1] if eos(model)[0] in tokens else tokens
    assert caption == processor.decode(tokens, skip_special_tokens=True).strip()


@pytest.mark.parametrize("name", ["vcd", "icd", "m3id"])
def test_explain_with_a_method_equals_brute_force(tiny, name):
    """`pnd explain --method`: both answers forced through the method, each token's log p_c, the contrast's log p_d and
    the method's score (and the top alternatives under each) equal two from-scratch forwards per step."""
    from pnd.decoding.methods import method
    from pnd.scoring.explain import explain

    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    settings = {"m3id": {"forgetting_rate": 0.6, "gate": 1.0}}.get(name, {})
    contrast = icd(processor, "llava_onevision", PROMPTS[:1]) if name == "icd" else None
    result = explain(pnd.attach(model), processor, inputs, method=method(name).processor(**settings),
                     prior_inputs=contrast, max_new_tokens=STEPS, top_k=3)
    combine, prior = {"vcd": (contrastive(1.0, 0.1), contrast_prior(noised(inputs))),
                      "icd": (contrastive(1.0, 0.1), contrast_prior(contrast)), "m3id": (m3id(0.6, 1.0), text_prior)}[name]
    plain = method_greedy(model, inputs, STEPS, prior_combine(0.0), masked_prior)[0][0].tolist()
    normalized = method_greedy(model, inputs, STEPS, combine, prior)[0][0].tolist()
    for tokens, want in ((result.plain, plain), (result.normalized, normalized)):
        ids = [t.token_id for t in tokens]
        assert ids == want[: len(ids)] and ids
        generated = torch.tensor([ids], device=DEVICE)
        with torch.no_grad():
            c, p, s = (method_forced(model, inputs, generated, view, prior)[0]
                       for view in (lambda c, p, t: c, lambda c, p, t: p, combine))
        for step, token in enumerate(tokens):
            for got, view in ((token.conditional, c), (token.prior, p), (token.normalized, s)):
                assert got == pytest.approx(float(view[step, token.token_id]), abs=2e-4)
            assert token.shift == pytest.approx(float((s[step].log_softmax(-1) - c[step])[token.token_id]), abs=2e-4)
            assert [a.value for a in token.top["normalized"]] == pytest.approx(s[step].topk(3).values.tolist(),
                                                                               abs=2e-4)


def test_forced_steps_are_the_methods_own_whatever_the_generation_config():
    """lmms-eval's loglikelihood and `pnd explain --method` force tokens through generate: a checkpoint's
    generation_config (a repetition penalty, n-gram bans, a minimum length, suppressed tokens, beams) does not enter
    the steps, which equal from-scratch forwards (log p_c, log p_d, the method's scores)."""
    from pnd.scoring.forced import forced_steps
    from pnd.testing import tiny_model

    model, processor = tiny_model("llava_onevision")
    config = model.generation_config
    config.repetition_penalty, config.no_repeat_ngram_size, config.min_length = 3.0, 1, 100
    config.suppress_tokens, config.num_beams = [7], 2
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    tokens = [5, 9, 5, 7]
    got = forced_steps(pnd.attach(model), inputs, pnd.M3ID(forgetting_rate=0.6, gate=1.0), tokens)
    generated = torch.tensor([tokens], device=DEVICE)
    with torch.no_grad():
        want = [method_forced(model, inputs, generated, view, text_prior)[0]
                for view in (lambda c, p, t: c, lambda c, p, t: p, m3id(0.6, 1.0))]
    for ours, reference in zip(got, want, strict=True):
        torch.testing.assert_close(ours, reference.float(), atol=2e-4, rtol=0)


def test_pnd_caption_method(tmp_path, no_model):
    """`pnd caption --method`: the settings are checked before any model loads."""
    from pnd.cli import main

    from helpers import write_mp4

    write_mp4(tmp_path / "a.mp4", 4)
    for args, message in [(["--method", "m3id", "--alpha", "1"], "'m3id' has no setting 'alpha'"),
                          (["--method", "vcd", "--method-args", "noise_step=2000"], "noise_step must be an integer in"),
                          (["--method", "vcd", "--method-args", "noise_step"], "key=value pairs")]:
        with pytest.raises(SystemExit, match=message):
            main(["caption", str(tmp_path / "a.mp4"), "--out", str(tmp_path / "c.jsonl"), *args])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4"]


@pytest.mark.parametrize("name, settings", [("icd", "alpha=0.5"), ("m3id", "forgetting_rate=0.5,gate=1"),
                                            ("pai", "start_layer=0,alpha=1"), ("only", "layer=1"),
                                            ("vista", "steer_strength=0.1")])
def test_pnd_caption_method_records(tmp_path, name, settings):
    """`pnd caption --method` writes what generate_captions (checked against the reference above) gives."""
    from pnd.cli import main
    from pnd.decoding.captioning import generate_captions
    from pnd.decoding.methods import method, parse_settings
    from pnd.demo import load_demo_model
    from pnd.io.video import read_video

    from helpers import write_mp4

    write_mp4(tmp_path / "a.mp4", 8)
    out = tmp_path / "c.jsonl"
    main(["caption", str(tmp_path / "a.mp4"), "--out", str(out), "--method", name, "--method-args", settings,
          "--max-new-tokens", "6", "--workers", "0", "--device", str(DEVICE), "--dtype", "auto"])
    record = json.loads(out.read_text().splitlines()[0])
    model, processor = load_demo_model()
    model.to(DEVICE)  # where the command ran it
    want = generate_captions(pnd.attach(model), processor, [read_video(tmp_path / "a.mp4", 8)], None, max_new_tokens=6,
                             method=name, settings=parse_settings(settings))[0]
    assert record["caption"] == want and record["method"] == name
    assert record["settings"] == method(name).settings(**parse_settings(settings))
    pnd.detach(model)


@pytest.mark.parametrize("args", [{"method": "icd", "alpha": 0.5}, {"method": "vcd", "noise_step": 250},
                                  {"method": "m3id", "forgetting_rate": "0.5", "gate": 1}])
def test_lmms_eval_model_args_method(tmp_path, args):
    """lmms-eval's pnd_hf with model_args method=...: generate_until and loglikelihood (the method's scores of the
    continuation, without the plausibility cut) equal the brute-force reference."""
    from types import SimpleNamespace

    import numpy as np
    from PIL import Image

    from pnd.integrations.lmms_eval import PndHf

    from helpers import tiny_model

    model, processor = tiny_model("llava_onevision")
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    lm = PndHf(pretrained=str(tmp_path / "model"), device=str(DEVICE), **args)
    image = Image.fromarray(np.random.default_rng(3).integers(0, 256, (40, 48, 3), dtype=np.uint8))
    lm.task_dict = {"t": {"test": [{"image": image}]}}
    question = "Is there a cat? Please answer yes or no."
    request = SimpleNamespace(args=(question, {"max_new_tokens": STEPS}, lambda doc: [doc["image"]], 0, "t", "test"))
    generated = lm.generate_until([request])

    def inputs_for(text):
        prompt = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"},
                                                                            {"type": "text", "text": text}]}],
                                               add_generation_prompt=True)
        return on_device(processor(text=[prompt], images=[[image]], return_tensors="pt"))

    inputs = inputs_for(question)
    combine, prior = {"icd": (contrastive(0.5, 0.1), contrast_prior(inputs_for(pnd.decoding.contrast.ICD_INSTRUCTION
                                                                               + " " + question))),
                      "vcd": (contrastive(1.0, 0.1), contrast_prior(noised(inputs, 250))),
                      "m3id": (m3id(0.5, 1.0), text_prior)}[args["method"]]
    tokens = method_greedy(model, inputs, STEPS, combine, prior)[0][0].tolist()
    tokens = tokens[: tokens.index(eos(model)[0]) + 1] if eos(model)[0] in tokens else tokens
    assert generated == [processor.decode(tokens, skip_special_tokens=True)]
    uncut = {"icd": contrastive(0.5), "vcd": contrastive(1.0), "m3id": combine}[args["method"]]
    choices = [" yes", " no maybe"]
    losses = lm.loglikelihood([SimpleNamespace(args=(question, c, lambda doc: [doc["image"]], 0, "t", "test"))
                               for c in choices])
    for choice, (loss, greedy) in zip(choices, losses):
        ids = processor.tokenizer(choice, add_special_tokens=False).input_ids
        with torch.no_grad():
            scores = method_forced(model, inputs, torch.tensor([ids], device=DEVICE), uncut, prior)[0]
        assert loss == pytest.approx(-float(scores[range(len(ids)), ids].mean()), abs=2e-4) and not greedy
    with pytest.raises(TypeError, match=r"unknown model_args \['noise_step'\] \(method=cpn also takes alpha, prior"):
        PndHf(pretrained=str(tmp_path / "model"), device="cpu", noise_step=3)


FAKE_LMMS_EVAL = '''
import argparse, json, pathlib, sys
parser = argparse.ArgumentParser()
for name in ("--model", "--model_args", "--tasks", "--batch_size", "--output_path", "--include_path"):
    parser.add_argument(name)
parser.add_argument("--log_samples", action="store_true")
args = parser.parse_args()
out = pathlib.Path(args.output_path)
with open(out.parent.parent / "calls.txt", "a") as calls:
    calls.write(args.model_args + "\\n")
value = len(args.model_args) / 100  # what the sweep must report for this run
tasks = args.tasks.split(",")
(out / "x_results.json").write_text(json.dumps({
    "results": {t: {"accuracy,none": value} for t in tasks},
    "configs": {t: {"metric_list": [{"metric": "accuracy"}]} for t in tasks}}))
for t in tasks:
    (out / f"x_samples_{t}.jsonl").write_text(json.dumps({"doc_id": 0, "filtered_resps": [args.model_args]}) + "\\n")
'''


def test_pnd_sweep_methods(tmp_path):
    """`pnd sweep --methods`: one lmms-eval run per method and alpha (m3id once, at its defaults), each with its
    model_args, and the table holds what each run reported (a stand-in for lmms-eval writes its files)."""
    import csv
    import sys

    from pnd.cli import main

    fake = tmp_path / "fake_lmms_eval.py"
    fake.write_text(FAKE_LMMS_EVAL)
    argv = ["sweep", "--model", "pnd_hf", "--model-args", "pretrained=m", "--tasks", "t", "--alphas", "0.5",
            "--launcher", f"{sys.executable} {fake}", "--out", str(tmp_path / "out")]
    assert main([*argv, "--methods", "cpn,vcd,m3id"]) == 0
    calls = (tmp_path / "out" / "calls.txt").read_text().split()
    assert calls == ["pretrained=m,alpha=0", "pretrained=m,alpha=0.5", "pretrained=m,method=vcd,alpha=0.5",
                     "pretrained=m,method=m3id"]
    assert sorted(p.name for p in (tmp_path / "out" / "runs").iterdir()) == ["alpha0", "alpha0.5", "m3id",
                                                                             "vcd-alpha0.5"]
    rows = list(csv.DictReader((tmp_path / "out" / "sweep.csv").read_text().splitlines()))
    assert [(r["method"], r["alpha"], float(r["value"])) for r in rows] == [
        ("", "0.0", len(c) / 100) if i == 0 else ("", "0.5", len(c) / 100) if i == 1 else
        (c.split("method=")[1].split(",")[0], "0.5" if "alpha" in c else "", len(c) / 100) for i, c in enumerate(calls)]
    assert "| task | metric | alpha 0 (plain) | alpha 0.5 | vcd alpha 0.5 | m3id |" in (tmp_path / "out" / "sweep.md").read_text()
    for extra, message in [(["--methods", "dola"], "--methods takes names among"),
                           (["--model-args", "pretrained=m,method=vcd"], "sets method; leave it out")]:
        with pytest.raises(SystemExit, match=message):
            main([*argv, *extra])


@pytest.mark.parametrize("model_type", ["gemma3", "qwen3_5", "internvl"])
@pytest.mark.parametrize("longer", [True, False])
def test_contrast_of_another_length_on_other_layouts(tiny, model_type, longer):
    """A per-token input padded with the prompt and sliding-window layers (Gemma 3), recurrent layers (Qwen3.5), a
    family whose expansion the bound processor reports (InternVL): a contrast prompt longer than the prompt (the
    prompt padded) or shorter (the contrast padded), on images of its own."""
    from pnd.testing import VIDEO_ARCHITECTURES

    model, processor = tiny(model_type)
    image = model_type not in VIDEO_ARCHITECTURES
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=image)
    prompts = ("Be vague and say very little. " + PROMPTS[0], "Be vague. " + PROMPTS[1]) if longer else ("a", "b c")
    contrast = tiny_inputs(processor, model_type, prompts, seed=4, image=image)
    assert (contrast["input_ids"].shape[1] > inputs["input_ids"].shape[1]) == longer
    out = run(model, inputs, pnd.PriorNormalized(0.8, prior="inputs", combine="contrastive"), prior_inputs=contrast,
              min_new_tokens=STEPS)
    assert_greedy(model, inputs, out, contrastive(0.8), contrast_prior(contrast))


@pytest.mark.parametrize("model_type", ["qwen2_vl", "gemma3", "qwen3_5"])
def test_contrast_beam_search_on_other_layouts(tiny, model_type):
    """Beam search with num_return_sequences on a longer contrast: the contrast rows repeated per beam and reordered
    with them (M-RoPE positions, token types, recurrent states)."""
    model, processor = tiny(model_type)
    image = model_type == "gemma3"
    one = tiny_inputs(processor, model_type, PROMPTS[:1], image=image)
    contrast = tiny_inputs(processor, model_type, ("Be vague and say very little. " + PROMPTS[0],), seed=4, image=image)
    out = run(model, one, pnd.PriorNormalized(0.6, prior="inputs", combine="contrastive"), prior_inputs=contrast, **BEAM)
    beam_check(model, one, out, contrastive(0.6), contrast_prior(contrast))


def test_a_comma_inside_a_method_setting_stays_in_its_value():
    """`--method-args "instruction=Be vague, please"` was refused ("got 'please'"): ICD's instruction had no comma."""
    from pnd.decoding.methods import method, parse_settings

    settings = method("icd").settings(**parse_settings("instruction=Be vague, please, and brief,alpha=2"))
    assert settings["instruction"] == "Be vague, please, and brief" and settings["alpha"] == 2.0
    with pytest.raises(ValueError, match="key=value pairs separated by commas .* got 'please'"):
        parse_settings("please,alpha=2")
