"""PAI, ONLY and VISTA on pnd's paired engine (docs/methods.md) against brute-force references built from the formulas: at
every step, from-scratch forwards of a separate, never-attached copy of the model with the intervention applied by
hand (`pnd.testing.reference.interventions`)."""

import pytest
import torch

import pnd
from pnd.decoding.methods import method
from pnd.testing.reference import masked_prior, method_forced, method_greedy, text_prior
from pnd.testing.reference.interventions import (
    only_combine,
    only_contrast,
    pai_combine,
    pai_conditioned,
    vista_conditioned,
)

from helpers import PROMPTS, assert_method_scores, eos, language_model_calls, on_device, tiny_inputs, tiny_model

STEPS = 4
BEAM = {"num_beams": 3, "num_return_sequences": 2, "length_penalty": 1.0}
SAMPLE = {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0}


def pai(prior="text", **settings):
    """pnd's PAI on a 2-layer tiny model, strong enough to change its tokens, and its reference pieces."""
    settings = {"alpha": 1.0, "gamma": 1.5, "beta": 0.1, "start_layer": 0, "end_layer": 32, **settings}
    reference = (pai_combine(settings["gamma"], settings["beta"]), masked_prior if prior == "masked" else text_prior,
                 pai_conditioned(settings["alpha"], settings["start_layer"], settings["end_layer"]))
    return pnd.PAI(**settings, prior=prior), reference


def only(**settings):
    settings = {"layer": 0, "alpha1": 3.0, "alpha2": 1.0, "gamma": 0.2, **settings}
    return pnd.ONLY(**settings), (only_combine(settings["alpha1"], settings["alpha2"], settings["gamma"]),
                                  only_contrast(settings["layer"]), None)


def vista(**settings):
    strength, prior = settings.get("steer_strength", 0.05), settings.get("prior", "text")
    return pnd.VISTA(strength, prior=prior), (lambda c, p, step: c, None, vista_conditioned(strength, prior))


METHODS = {"pai": pai, "only": only, "vista": vista}
NAMES = list(METHODS)
FAMILIES = ["llava_onevision", "qwen2_vl", "qwen3_vl", "gemma3", "internvl", "llava"]
VIDEO_FAMILIES = ["llava_onevision", "qwen2_vl", "qwen3_vl", "internvl"]


def method_on(name, model_type, **settings):
    """METHODS[name] for `model_type`: PAI and VISTA take the masked prior on Gemma 3, whose sliding-window layers
    refuse the text prior."""
    if name != "only" and model_type == "gemma3":
        settings = {"prior": "masked", **settings}
    return METHODS[name](**settings)


@pytest.fixture(scope="module")
def models():
    """model type -> (attached model, processor, a never-attached copy for the reference)."""
    built = {}

    def get(model_type):
        if model_type not in built:
            model, processor = tiny_model(model_type)
            built[model_type] = (pnd.attach(model), processor, tiny_model(model_type)[0])
        return built[model_type]
    return get



def generate(model, inputs, processor, **kwargs):
    kwargs = {"do_sample": False, **kwargs}
    return model.generate(**inputs, max_new_tokens=STEPS, logits_processor=[processor], return_dict_in_generate=True,
                          output_scores=True, **kwargs)



def forced(reference_model, inputs, generated, reference, banned=()):
    combine, prior, conditioned = reference
    return method_forced(reference_model, inputs, generated, combine, prior, conditioned=conditioned, banned=banned)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("model_type", FAMILIES)
def test_greedy_on_a_padded_batch_matches_brute_force(models, name, model_type):
    model, processor, reference_model = models(model_type)
    ours, reference = method_on(name, model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    out = generate(model, inputs, ours)
    combine, prior, conditioned = reference
    tokens, scores = method_greedy(reference_model, inputs, STEPS, combine, prior, banned=eos(model),
                                   conditioned=conditioned)
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1]:], tokens.to(out.sequences.device))
    assert_method_scores(model, torch.stack(out.scores, 1), torch.stack(scores, 1))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("model_type", VIDEO_FAMILIES)
def test_image_prompt_matches_brute_force(models, name, model_type):
    """The families of the test above that take video: on an image prompt too (the others take only images)."""
    model, processor, reference_model = models(model_type)
    ours, (combine, prior, conditioned) = method_on(name, model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1], image=True)
    out = generate(model, inputs, ours)
    tokens, _ = method_greedy(reference_model, inputs, STEPS, combine, prior, banned=eos(model), conditioned=conditioned)
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1]:], tokens)


def assert_beam_scores(model, reference_model, inputs, out, reference):
    """Each returned beam's sequence score is the reference's forced scores of its tokens (to its end), per token."""
    prompt_len = inputs["input_ids"].shape[1]
    for row in range(out.sequences.shape[0]):
        generated = out.sequences[row, prompt_len:]
        ends = (generated == eos(model)[0]).nonzero()
        length = int(ends[0, 0]) + 1 if len(ends) else len(generated)
        scores = forced(reference_model, inputs, generated[None, :length], reference)[0]
        total = scores.gather(1, generated[:length, None]).sum()
        torch.testing.assert_close(out.sequences_scores[row], total / length, atol=2e-4, rtol=0)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("model_type", FAMILIES)
def test_beam_search_sampling_and_static_cache_match_brute_force(models, name, model_type):
    model, processor, reference_model = models(model_type)
    ours, reference = method_on(name, model_type)
    one, batch = (tiny_inputs(processor, model_type, prompts) for prompts in (PROMPTS[:1], PROMPTS))
    assert_beam_scores(model, reference_model, one, generate(model, one, ours, **BEAM), reference)
    torch.manual_seed(3)
    out = generate(model, batch, ours, min_new_tokens=STEPS, **SAMPLE)
    generated = out.sequences[:, batch["input_ids"].shape[1]:]
    assert_method_scores(model, torch.stack(out.scores, 1),
                         forced(reference_model, batch, generated, reference, banned=eos(model)))  # min_new_tokens'
    # sliding-window layers: pnd's paired static cache refuses them (VISTA's steps run one row, in a plain StaticCache)
    if model_type == "gemma3" and name != "vista":
        with pytest.raises(ValueError, match="static cache holds full-attention layers only"):
            generate(model, batch, ours, cache_implementation="static")
        return
    for inputs in (batch, one):  # unpadded too: there generate gives a static cache it does not compile no mask
        out = generate(model, inputs, ours, cache_implementation="static", min_new_tokens=STEPS)
        generated = out.sequences[:, inputs["input_ids"].shape[1]:]
        assert_method_scores(model, torch.stack(out.scores, 1),
                             forced(reference_model, inputs, generated, reference, banned=eos(model)))


@pytest.mark.parametrize("name", NAMES)
def test_each_method_changes_the_tokens(models, name):
    """The reference is not vacuous: the method's tokens are not plain generate's."""
    model, processor, _ = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    plain = model.generate(**inputs, max_new_tokens=STEPS, do_sample=False)
    assert not torch.equal(generate(model, inputs, METHODS[name]()[0]).sequences, plain)


@pytest.mark.parametrize("name", NAMES)
def test_explain_with_each_method_equals_brute_force(models, name):
    """`pnd explain --method pai|only|vista`: both answers forced through the method; each token's three views and
    the top alternatives under the method equal from-scratch forwards per step. PAI's views are its amplified
    log p_img and the text-only log p_text; ONLY's the model's log p and the heads-off contrast; VISTA, which has no
    contrast at decoding, shows the unsteered log P(w | v), the text-only prompt and the steered log-probabilities."""
    from pnd.scoring.explain import explain

    model, processor, reference_model = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    ours, (combine, prior, conditioned) = METHODS[name]()
    result = explain(model, processor, inputs, method=ours, max_new_tokens=STEPS, top_k=3)
    plain = model.generate(**inputs, max_new_tokens=STEPS, do_sample=False)[0, inputs["input_ids"].shape[1]:]
    steered, _ = method_greedy(reference_model, inputs, STEPS, combine, prior, conditioned=conditioned)
    views = [(lambda c, p, t: c, prior, conditioned), (lambda c, p, t: p, prior, conditioned),
             (combine, prior, conditioned)]
    if name == "vista":  # the unsteered model, the text-only prompt, the steered model
        views = [(lambda c, p, t: c, None, None), (lambda c, p, t: p, text_prior, None), (combine, None, conditioned)]
    for tokens, want in ((result.plain, plain.tolist()), (result.normalized, steered[0].tolist())):
        ids = [t.token_id for t in tokens]
        assert ids == want[: len(ids)] and ids
        generated = torch.tensor([ids], device=model.device)
        with torch.no_grad():
            c, p, s = (method_forced(reference_model, inputs, generated, view, contrast, conditioned=edit)[0]
                       for view, contrast, edit in views)
        for step, token in enumerate(tokens):
            for got, view in ((token.conditional, c), (token.prior, p), (token.normalized, s)):
                assert got == pytest.approx(float(view[step, token.token_id]), abs=2e-4)
            assert [a.value for a in token.top["normalized"]] == pytest.approx(s[step].topk(3).values.tolist(),
                                                                               abs=2e-4)
    if name == "vista":
        assert any(t.shift != 0 for t in result.normalized)  # the steering moved its tokens


@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_vistas_decoding_steps_run_the_conditioned_rows_alone(models, cache_implementation):
    """VISTA's prior rows serve its prefill's steering vectors only: each decoding step is one language-model call on
    the batch's own rows (not the pair's 2n), on the dynamic and on the static cache, as plain generate's steps."""
    model, processor, _ = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    calls, _ = language_model_calls(model, lambda: model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS,
                                                                  logits_processor=[pnd.VISTA()],
                                                                  cache_implementation=cache_implementation))
    steps = [call["inputs_embeds"].shape[:2] for call in calls if call["inputs_embeds"].shape[1] == 1]
    assert steps == [(inputs["input_ids"].shape[0], 1)] * (STEPS - 1)


@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_vista_on_recurrent_layers_matches_brute_force(models, cache_implementation):
    """VISTA steers layer outputs, which a recurrent layer (Qwen3.5's Gated DeltaNet) has too: greedy on a padded batch
    equals the reference, on the dynamic cache and on a static one (generate's own StaticCache, with its recurrent
    layers; pnd's paired static cache refuses them)."""
    model, processor, reference_model = models("qwen3_5")
    ours, (combine, prior, conditioned) = vista()
    inputs = tiny_inputs(processor, "qwen3_5", PROMPTS)
    out = generate(model, inputs, ours, cache_implementation=cache_implementation)
    tokens, _ = method_greedy(reference_model, inputs, STEPS, combine, prior, banned=eos(model), conditioned=conditioned)
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1]:], tokens)


@pytest.mark.parametrize("name, ours", [("pai", pnd.PAI(start_layer=0)), ("vista", pnd.VISTA())])
def test_prefill_packs_the_prior_tokens(models, name, ours):
    """The prior's text tokens ride in the prompt's call (docs/methods.md): PAI's prefill is one language-model call,
    its attention intervention acting on the prompt part; VISTA's is two, the unsteered prompt with the prior tokens,
    then the steered prompt."""
    model, processor, _ = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    calls, _ = language_model_calls(model, lambda: model.generate(**inputs, max_new_tokens=1, logits_processor=[ours]))
    lengths = [call["inputs_embeds"].shape[:2] for call in calls]
    rows, length = inputs["input_ids"].shape
    after_video = max(len(ids) - ids.tolist().index(model.config.video_token_id) for ids in inputs["input_ids"])
    assert len(lengths) == (1 if name == "pai" else 2) and lengths[0][0] == rows
    assert length < lengths[0][1] <= length + after_video and lengths[1:] in ([], [(rows, length)])


@pytest.mark.parametrize("mode", [{}, {"num_beams": 3}, {"do_sample": True, "top_k": 20},
                                  {"cache_implementation": "static"}])
def test_neutral_settings_are_plain_generate_bit_for_bit(models, mode):
    model, processor, _ = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    torch.manual_seed(0)
    plain = model.generate(**inputs, max_new_tokens=STEPS, return_dict_in_generate=True, output_scores=True,
                           **{"do_sample": False, **mode})
    for neutral in (pnd.PAI(alpha=0.0, gamma=1.0), pnd.ONLY(alpha1=0.0, alpha2=0.0), pnd.VISTA(steer_strength=0.0)):
        torch.manual_seed(0)
        ours = generate(model, inputs, neutral, **mode)
        assert torch.equal(plain.sequences, ours.sequences)
        assert all(torch.equal(a, b) for a, b in zip(plain.scores, ours.scores))


@pytest.mark.parametrize("make, message", [
    (lambda: pnd.PAI(alpha=-0.1), r"alpha must be a finite number in \[0"),
    (lambda: pnd.PAI(gamma=0.5), r"gamma must be a finite number in \[1"),
    (lambda: pnd.PAI(beta=1.5), r"beta must be a finite number in \[0, 1\]"),
    (lambda: pnd.PAI(start_layer=4, end_layer=4), "end_layer must be an integer >= 5"),
    (lambda: pnd.PAI(prior="blank"), "PAI's prior must be"),
    (lambda: pnd.ONLY(layer=-1), "layer must be an integer >= 0"),
    (lambda: pnd.ONLY(alpha1=float("nan")), "alpha1 must be a finite number"),
    (lambda: pnd.ONLY(gamma=-1), "gamma must be a finite number"),
])
def test_settings_out_of_range_are_refused_with_the_range(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_models_the_interventions_cannot_reach_are_refused_with_the_reason(models):
    model, processor, _ = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    with pytest.raises(ValueError, match=r"acts in no layer of this model's 2 decoder layers \(start_layer=2, "
                                         r"end_layer=32\): choose layers in \[0, 2\)"):
        generate(model, inputs, pnd.PAI())  # the paper's start_layer 2 on a 2-layer model
    with pytest.raises(ValueError, match=r"acts in no layer .*\(layer=2\)"):
        generate(model, inputs, pnd.ONLY(layer=2))
    hybrid, hybrid_processor = tiny_model("qwen3_5")
    pnd.attach(hybrid)
    with pytest.raises(ValueError, match="'linear_attention' layer"):
        generate(hybrid, tiny_inputs(hybrid_processor, "qwen3_5", PROMPTS[:1]), pnd.ONLY())
    eager, eager_processor = tiny_model("llava_onevision")
    eager.set_attn_implementation("eager")
    pnd.attach(eager)
    with pytest.raises(ValueError, match="runs 'eager'.*attn_implementation='sdpa'"):
        generate(eager, tiny_inputs(eager_processor, "llava_onevision", PROMPTS[:1]), pnd.ONLY())
    altup, altup_processor = tiny_model("gemma3n")  # its layers carry AltUp's streams side by side, not one
    pnd.attach(altup)
    with pytest.raises(ValueError, match="VISTA adds its vectors to one residual stream .* Gemma3nForConditional"):
        generate(altup, tiny_inputs(altup_processor, "gemma3n", PROMPTS[:1]), pnd.VISTA(prior="masked"))


# Families whose language model pnd finds through the registry (`pnd.interventions.engine.text_decoder`): the decoder
# under a causal LM (Kosmos-2, BLIP-2, Llama 4, Nemotron-H Omni), a last hidden state after a final norm of another
# name (Persimmon's `final_layernorm` in Fuyu, LFM2's `embedding_norm`, Kosmos-2's `layer_norm`, Nemotron-H's
# `norm_f`), an attention module named `mixer` (Nemotron-H's blocks). Each method in the layers it allows: softmax
# attention only for PAI and ONLY (LFM2's attention layers among its convolutions: 1, and LFM 3's sliding 1 and full 3;
# Nemotron-H's one attention block, 2, among Mamba-2 and MoE blocks); Llama 4's chunked layers with its NoPE layer 1,
# and the masked prior where a sliding window or chunks refuse the text one, or where the reference's text prior
# (`kept_tokens_forward`: a pad id, a forward without pixels, Kosmos' positions from the padding id + 1) does not
# reproduce the family's own (Fuyu, Kosmos-2 and 2.5, BLIP-2). ONLY is refused on
# Kosmos-2 and BLIP-2 (`test_families_reached_through_the_registry_refuse_what_their_layers_do_not_allow`).
REACHED = {
    "fuyu": {"pai": {"prior": "masked"}, "only": {}, "vista": {"prior": "masked"}},
    "lfm2_vl": {"pai": {"start_layer": 1, "end_layer": 2}, "only": {"layer": 1}, "vista": {}},
    "lfm3_vl": {"pai": {"start_layer": 3, "end_layer": 4, "prior": "masked"}, "only": {"layer": 1},
                "vista": {"prior": "masked"}},
    "kosmos-2": {"pai": {"prior": "masked"}, "vista": {"prior": "masked"}},
    "kosmos-2.5": {"pai": {"prior": "masked"}, "only": {}, "vista": {"prior": "masked"}},
    "blip-2": {"pai": {"prior": "masked"}, "vista": {"prior": "masked"}},
    "llama4": {"pai": {"prior": "masked"}, "only": {"layer": 0}, "vista": {"prior": "masked"}},
    "nemotron_h_omni": {"pai": {"start_layer": 2, "end_layer": 3}, "only": {"layer": 2}, "vista": {}},
}
LLAMA4_CHUNK = 25  # slots: the chunk of the prompt's last query (slot 49 of the padded batch) holds visual slots


@pytest.mark.parametrize("model_type, name", [(t, n) for t, methods in REACHED.items() for n in methods])
def test_families_reached_through_the_registry_match_brute_force(models, model_type, name):
    """Greedy on a padded batch (Kosmos-2.5: one prompt) equals the brute-force reference (its own layer list and attention modules, and
    transformers' `hidden_states` for VISTA's vectors), tokens and scores."""
    model, processor, reference_model = models(model_type)
    if model_type == "llama4":  # the tiny model's 16-slot chunks would keep every visual key from the newest queries
        for each in (model, reference_model):
            each.config.get_text_config(decoder=True).attention_chunk_size = LLAMA4_CHUNK
    ours, (combine, prior, conditioned) = METHODS[name](**REACHED[model_type][name])
    # Kosmos-2.5: transformers' own forward, which the reference runs, puts a left-padded row's image on its padding
    # (its processor's one image_embeds_position_mask for the batch; pnd's paired calls give each row its own)
    prompts = PROMPTS[:1] if model_type == "kosmos-2.5" else PROMPTS
    inputs = tiny_inputs(processor, model_type, prompts, image=True)
    out = generate(model, inputs, ours)
    tokens, scores = method_greedy(reference_model, inputs, STEPS, combine, prior, banned=eos(model),
                                   conditioned=conditioned)
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1]:], tokens.to(out.sequences.device))
    assert_method_scores(model, torch.stack(out.scores, 1), torch.stack(scores, 1))


@pytest.mark.parametrize("model_type, name", [(t, n) for t, methods in REACHED.items() for n in methods])
def test_families_reached_through_the_registry_beam_search_and_sampling_match_brute_force(models, model_type, name):
    """Beam search's sequence scores and sampling's scores (one prompt) equal the reference's forced scores. Beam search
    not on Llama 4 and Fuyu, where transformers' own generate crashes on any expansion of the batch
    (tests/test_exactness.py's EXPANSION_CRASHES)."""
    model, processor, reference_model = models(model_type)
    if model_type == "llama4":
        for each in (model, reference_model):
            each.config.get_text_config(decoder=True).attention_chunk_size = LLAMA4_CHUNK
    ours, reference = METHODS[name](**REACHED[model_type][name])
    one = tiny_inputs(processor, model_type, PROMPTS[:1], image=True)
    prompt_len = one["input_ids"].shape[1]
    if model_type not in ("llama4", "fuyu"):
        assert_beam_scores(model, reference_model, one, generate(model, one, ours, **BEAM), reference)
    torch.manual_seed(3)
    out = generate(model, one, ours, min_new_tokens=STEPS, **SAMPLE)
    assert_method_scores(model, torch.stack(out.scores, 1),
                         forced(reference_model, one, out.sequences[:, prompt_len:], reference, banned=eos(model)))


@pytest.mark.parametrize("model_type, ours, message", [
    # Qwen4-Exp: hyper-connections, its layers' outputs hc_count streams wide, mixed into one after the last layer
    ("qwen4_exp", pnd.VISTA(), r"VISTA adds its last vector.* differ in width \(64 and 128\).* hyper-connections"),
    ("qwen4_exp", pnd.ONLY(layer=1), "decoder layer 1 of this model is a 'indexed_attention' layer"),
    ("qwen4_exp", pnd.PAI(start_layer=0), "decoder layer 0 of this model is a 'linear_attention' layer"),
    ("lfm2_vl", pnd.PAI(start_layer=0), "decoder layer 0 of this model is a 'conv' layer"),
    ("nemotron_h_omni", pnd.ONLY(layer=1), "decoder layer 1 of this model is a 'moe' layer"),
    ("nemotron_h_omni", pnd.PAI(start_layer=2), "decoder layer 3 of this model is a 'linear_attention' layer"),
    # ONLY's contrast rows run the same inputs through the whole model, which these families' generate does not
    ("kosmos-2", pnd.ONLY(), "generate runs its language model's generate.* nor ONLY's contrast rows"),
    ("blip-2", pnd.ONLY(), "generate runs its language model's generate.* nor ONLY's contrast rows"),
])
def test_families_reached_through_the_registry_refuse_what_their_layers_do_not_allow(models, model_type, ours,
                                                                                      message):
    model, processor, _ = models(model_type)
    with pytest.raises(ValueError, match=message):
        generate(model, tiny_inputs(processor, model_type, PROMPTS[:1], image=True), ours)


@pytest.mark.parametrize("name", NAMES)
def test_a_prompt_without_a_visual_token_is_refused(models, name):
    """docs/design.md §3.7; ONLY reads its heads' entropy over the visual slots, PAI amplifies them."""
    model, processor, _ = models("llava_onevision")
    text_only = on_device(processor.tokenizer(["Describe the video."], return_tensors="pt"))
    with pytest.raises(ValueError, match=r"No visual tokens in prompt row\(s\) \[0\]"):
        generate(model, text_only, METHODS[name]()[0])


@pytest.mark.parametrize("name", NAMES)
def test_a_prompt_without_attention_mask_decodes_as_with_one(models, name):
    """generate builds the mask of an unpadded prompt given without one; each method decodes as with it (ONLY's
    contrast rows took theirs from the inputs)."""
    model, processor, _ = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    without = {k: v for k, v in inputs.items() if k != "attention_mask"}
    ours = METHODS[name]()[0]
    assert torch.equal(generate(model, without, ours).sequences, generate(model, inputs, ours).sequences)


@pytest.mark.parametrize("name", NAMES)
def test_refusals_name_the_method(models, name):
    """A generate argument the paired decoding cannot run is refused naming the user's method, not PriorNormalized."""
    model, processor, _ = models("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    ours = METHODS[name]()[0]
    label = type(ours).__name__
    with pytest.raises(ValueError, match=rf"^{label} does not support use_cache=False: .* or generate without {label}"):
        generate(model, inputs, ours, use_cache=False)


def test_registry_builds_pai_and_only_with_the_papers_defaults():
    assert repr(method("pai").processor()) == repr(pnd.PAI(alpha=0.2, gamma=1.1, beta=0.1, start_layer=2, end_layer=32))
    assert repr(method("only").processor()) == repr(pnd.ONLY(layer=0, alpha1=3.0, alpha2=1.0, gamma=0.2))
    assert method("pai").processor(start_layer="1", alpha="0.5").start_layer == 1


@pytest.mark.parametrize("name, settings", [("pai", {"start_layer": 0, "alpha": 1.0, "gamma": 1.5}), ("only", {}),
                                            ("vista", {"steer_strength": 0.05})])
def test_lmms_eval_model_args_method(tmp_path, models, name, settings):
    """lmms-eval's pnd_hf with model_args method=pai|only|vista (as strings, as lmms-eval passes them): generate_until
    equals the brute-force reference, and loglikelihood scores a choice with the method."""
    from types import SimpleNamespace

    import numpy as np
    from PIL import Image

    from pnd.integrations.lmms_eval import PndHf

    _, processor, reference_model = models("llava_onevision")
    reference_model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    lm = PndHf(pretrained=str(tmp_path / "model"), device=str(reference_model.device), method=name,
               **{k: str(v) for k, v in settings.items()})
    image = Image.fromarray(np.random.default_rng(3).integers(0, 256, (40, 48, 3), dtype=np.uint8))
    lm.task_dict = {"t": {"test": [{"image": image}]}}
    question = "Is there a cat? Please answer yes or no."
    request = SimpleNamespace(args=(question, {"max_new_tokens": STEPS}, lambda doc: [doc["image"]], 0, "t", "test"))
    generated = lm.generate_until([request])
    prompt = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"},
                                                                        {"type": "text", "text": question}]}],
                                           add_generation_prompt=True)
    inputs = on_device(processor(text=[prompt], images=[[image]], return_tensors="pt"))
    _, (combine, prior, conditioned) = METHODS[name](**settings)
    tokens = method_greedy(reference_model, inputs, STEPS, combine, prior, conditioned=conditioned)[0][0].tolist()
    end = eos(reference_model)[0]
    tokens = tokens[: tokens.index(end) + 1] if end in tokens else tokens
    assert generated == [processor.decode(tokens, skip_special_tokens=True)]
    choices = [" yes", " no", " zebra", " A"]  # PAI's cut beta drops some of them: no cut in loglikelihood
    losses = lm.loglikelihood([SimpleNamespace(args=(question, c, lambda doc: [doc["image"]], 0, "t", "test"))
                               for c in choices])
    assert all(np.isfinite(loss) for loss, _ in losses)
