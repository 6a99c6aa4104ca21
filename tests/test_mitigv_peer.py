"""pnd's VCD, ICD, M3ID, PAI, ONLY and VISTA against mitigv 0.1.7's (the packaged peer, written by others), greedy on a
tiny LLaVA-1.5.

Where the definitions agree the tokens are the same; where they differ by construction (docs/methods.md, "pnd and
mitigv") the test shows the difference and the configuration of pnd that gives mitigv's tokens.

PAI, ONLY and VISTA (below `LAYERS`):

Two things are needed to run mitigv's three at all here:
- on transformers 5 mitigv's `LlavaModelAdapter` finds no decoder layers to patch (it looks for `language_model` on
  the adapter, or on the adapter's `model`: `LlavaForConditionalGeneration` has neither, its language model is
  `model.model.language_model`); `LanguageLayers` below points it there;
- PAI's default layers [2, 32) need a model with more than 2 layers (mitigv refuses a start_layer the model does not
  have): `tiny_model("llava")`'s config with `LAYERS` language-model layers.

Where they differ by construction, the test shows the difference on a case and the configuration that gives the same
tokens:
- PAI and VISTA's text-only prompt: mitigv removes `<image>` and the whitespace after it from the text and
  re-tokenizes it; on LLaVA-1.5's `USER: <image>\\nDescribe ...` that drops the newline, which pnd's text-only rows
  (the visual tokens dropped) keep. Without whitespace after `<image>` (the chat template's) the prompts are the same.
- PAI's attention: mitigv replaces the patched layers' attention by an eager one that adds the mask it is given; on a
  model that runs SDPA transformers gives no mask to a causal prefill, so mitigv's patched layers attend to later
  prompt tokens too (every prompt token but the last: the newest query's row is right). mitigv's tokens change
  wherever a patched layer is not the last one; on the same weights in eager attention they are pnd's.
ONLY (no text-only prompt; mitigv forces eager attention itself) gives the same tokens on both prompts. The scores:
mitigv combines raw logits, pnd log-probabilities: one constant per step apart (VISTA: the steered model's logits
against its log-probabilities).
"""

import copy

import pytest
import torch

import pnd
from pnd.architectures.reported import bind_processor
from pnd.decoding.methods import method
from pnd.testing import random_video, sharpen_attention, tiny_model

mitigv = pytest.importorskip("mitigv")
from mitigv import build_mitigator  # noqa: E402
from mitigv.backends.llava import LlavaModelAdapter, LlavaProcessorAdapter  # noqa: E402

TOKENS = 10
LLAVA_PROMPT = "USER: <image>\nDescribe the image. ASSISTANT:"  # LLaVA-1.5's template: whitespace after <image>
GATE = 0.01  # near the tiny model's top probabilities: the gate opens at some steps only
CHAT = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}]


class LanguageLayers(LlavaModelAdapter):
    """mitigv's LLaVA adapter, with the language model where mitigv looks for it (`_language_model_layers`: its
    `.layers`)."""

    @property
    def language_model(self):
        return self.model.model.language_model


@pytest.fixture(scope="module")
def llava():
    model, processor = tiny_model("llava")
    pnd.attach(model)
    return model, processor, random_video(0, frames=1, size=32)[0]


def peer(llava, name, prompt=LLAVA_PROMPT, **config):
    """mitigv's `name` run greedy on `prompt`: (its generated ids, the mitigator, its scores per step); the
    mitigator's `forwards` holds the next-token logits of each forward it ran."""
    model, processor, image = llava
    mitigator = build_mitigator(name, LanguageLayers(model), LlavaProcessorAdapter(processor), do_sample=False,
                                max_new_tokens=TOKENS, **config)
    mitigator._decode = lambda ids: ids  # its token ids, not text
    scores = []

    def sample_next(logits, cfg):
        scores.append(logits.clone())
        return type(mitigator)._sample_next(mitigator, logits, cfg)
    mitigator._sample_next = sample_next
    forwards = mitigator.forwards = []  # each forward's next-token logits, in call order

    def forward(*args):
        logits, past = type(mitigator)._forward(mitigator, *args)
        forwards.append(logits.clone())
        return logits, past
    mitigator._forward = forward
    return mitigator.generate(image, prompt), mitigator, scores


def ours(llava, processor_=None, prompt=LLAVA_PROMPT, **kwargs):
    """pnd's greedy tokens for `prompt` with `processor_` (None: plain generate), and the generate output."""
    model, processor, image = llava
    inputs = processor(text=[prompt], images=[[image]], return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=TOKENS, do_sample=False, return_dict_in_generate=True,
                         output_scores=True, logits_processor=[processor_] if processor_ else [], **kwargs)
    return out.sequences[:, inputs["input_ids"].shape[1]:], out


def same(ours_ids, theirs_ids):
    """mitigv stops at the end-of-sequence token; generate pads after it."""
    assert torch.equal(ours_ids[:, :theirs_ids.shape[1]], theirs_ids)


def vcd(seed):
    return pnd.PriorNormalized(1.0, prior="noise", combine="contrastive", plausibility=0.1, noise_step=500, seed=seed)


def test_vcd_same_noise_same_tokens(llava):
    theirs, mitigator, _ = peer(llava, "vcd", alpha=1.0, beta=0.1, seed=5)  # mitigv seeds the global RNG with it
    pixels = llava[1](text=[LLAVA_PROMPT], images=[[llava[2]]], return_tensors="pt")["pixel_values"]
    assert torch.equal(mitigator._distorted_inputs["pixel_values"], pnd.vcd_noise(pixels, 500, seed=5))
    same(ours(llava, vcd(5))[0], theirs)
    assert not torch.equal(ours(llava)[0][:, :theirs.shape[1]], theirs)  # VCD changed the tokens
    # Without a seed mitigv draws its noise from the global random state: the same tokens once that state is seeded.
    torch.manual_seed(5)
    same(ours(llava, vcd(5))[0], peer(llava, "vcd", alpha=1.0, beta=0.1)[0])
    assert not torch.equal(ours(llava, vcd(6))[0][:, :theirs.shape[1]], theirs)


def test_icd_is_the_prior_form_on_mitigvs_contrast_prompt(llava):
    theirs, mitigator, _ = peer(llava, "icd", lam=1.0, alpha=0.1)
    contrast = mitigator._disturbed_inputs  # mitigv's disturbed prompt: the same image, its tokens
    # mitigv's l_std - lam * l_dst is pnd's prior form at alpha = lam (plausibility: its alpha).
    same(ours(llava, pnd.PriorNormalized(1.0, prior="inputs", plausibility=0.1), prior_inputs=contrast)[0], theirs)
    paper = ours(llava, method("icd").processor(), prior_inputs=contrast)[0]  # (1 + a) l_std - a l_dst, a = 1
    assert not torch.equal(paper[:, :theirs.shape[1]], theirs)
    # ... which ranks tokens as mitigv's lam = a / (1 + a) = 0.5.
    same(paper, peer(llava, "icd", lam=0.5, alpha=0.1)[0])


def test_icd_contrast_prompt_has_mitigvs_leading_space(llava):
    """mitigv edits the prompt string: `<image>` becomes `<image> You are ...` (a space token pnd's doesn't have)."""
    _, processor, image = llava
    prompt = processor.apply_chat_template(CHAT, add_generation_prompt=True)
    assert "<image>Describe" in prompt
    _, mitigator, _ = peer(llava, "icd", prompt=prompt)
    theirs = mitigator._disturbed_inputs["input_ids"][0].tolist()
    mine = pnd.icd_inputs(processor, CHAT, images=[[image]])["input_ids"][0].tolist()
    end = max(i for i, token in enumerate(mine) if token == llava[0].config.image_token_id) + 1  # after the image
    assert theirs == mine[:end] + [processor.tokenizer.convert_tokens_to_ids("Ġ")] + mine[end:]


@pytest.mark.parametrize("forgetting_rate", [0.2, 1.0])
def test_m3id_on_mitigvs_unconditioned_prompt(llava, forgetting_rate):
    """mitigv's unconditioned prompt is the text without `<image>` and the whitespace after it, re-tokenized: on
    LLaVA-1.5's `<image>\\n` that drops the newline, which pnd's prior="text" (the visual tokens dropped) keeps."""
    model, processor, image = llava
    theirs, mitigator, _ = peer(llava, "m3id", alpha=1.0, forgetting_rate=forgetting_rate)  # gate 1: always open
    unconditioned = mitigator._uncond_inputs
    assert processor.decode(unconditioned["input_ids"][0]) == "USER: Describe the image. ASSISTANT:"
    text_prior = ours(llava, pnd.M3ID(forgetting_rate, gate=1.0, prior="text"))[0]
    same(ours(llava, pnd.M3ID(forgetting_rate, gate=1.0, prior="inputs"), prior_inputs=unconditioned)[0], theirs)
    assert not torch.equal(text_prior[:, :theirs.shape[1]], theirs)
    # On a template without whitespace after <image> the two unconditioned prompts are the same tokens.
    prompt = processor.apply_chat_template(CHAT, add_generation_prompt=True)
    _, chat, _ = peer(llava, "m3id", prompt=prompt, alpha=1.0, forgetting_rate=forgetting_rate)
    inputs = processor(text=[prompt], images=[[image]], return_tensors="pt")
    visual = inputs["input_ids"][0] == model.config.image_token_id
    assert torch.equal(chat._uncond_inputs["input_ids"][0], inputs["input_ids"][0][~visual])
    same(ours(llava, pnd.M3ID(forgetting_rate, gate=1.0), prompt=prompt)[0],
         peer(llava, "m3id", prompt=prompt, alpha=1.0, forgetting_rate=forgetting_rate)[0])


def test_m3id_scores_are_mitigvs_up_to_a_constant_per_step(llava):
    """Same tokens, other scores: mitigv combines raw logits, pnd log-probabilities; where the gate is closed mitigv
    returns the raw logits, pnd the conditioned log-probabilities."""
    theirs, mitigator, their_scores = peer(llava, "m3id", alpha=GATE, forgetting_rate=0.5)
    mine, out = ours(llava, pnd.M3ID(0.5, gate=GATE, prior="inputs"), prior_inputs=mitigator._uncond_inputs)
    same(mine, theirs)
    conditioned = mitigator.forwards[::2]  # a step runs the conditioned forward, then the unconditioned one
    closed = [bool(step.softmax(-1).max() >= GATE) for step in conditioned]
    assert any(closed) and not all(closed)
    for theirs_step, mine_step, gate_closed in zip(their_scores, out.scores, closed):
        shift = mine_step - theirs_step  # one constant per step
        torch.testing.assert_close(shift, shift.mean().expand_as(shift), atol=1e-4, rtol=0)
        assert shift.abs().max() > 1e-2
        if gate_closed:
            torch.testing.assert_close(mine_step, theirs_step.log_softmax(-1), atol=1e-5, rtol=0)


# --- PAI, ONLY and VISTA, on a tiny LLaVA-1.5 of `LAYERS` layers ---

LAYERS = 4  # PAI's default layers [2, 32): layers 2 and 3 amplified


def llava_layers(attention="sdpa"):
    """`tiny_model("llava")` with `LAYERS` language-model layers (its seed, its sharpened attention), and its processor."""
    from transformers import LlavaForConditionalGeneration

    model, processor = tiny_model("llava")
    config = copy.deepcopy(model.config)
    config.text_config.num_hidden_layers = LAYERS
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    sharpen_attention(model, 4.0)
    if attention != "sdpa":
        model.set_attn_implementation(attention)
    bind_processor(model, processor)
    return model, processor


@pytest.fixture(scope="module")
def llava4():
    """The attached model (pnd's side, and mitigv's ONLY and VISTA), its processor and the image."""
    model, processor = llava_layers()
    pnd.attach(model)
    return model, processor, random_video(0, frames=1, size=32)[0]


@pytest.fixture(scope="module")
def eager(llava4):
    """The same weights in eager attention, never attached: mitigv's PAI side."""
    return llava_layers("eager")[0], *llava4[1:]


@pytest.fixture(scope="module")
def chat(llava4):
    """The chat template's prompt: no whitespace after `<image>`."""
    prompt = llava4[1].apply_chat_template(CHAT, add_generation_prompt=True)
    assert "<image>Describe" in prompt
    return prompt


def changed(llava4, theirs, prompt):
    """The method changed the tokens: mitigv's are not plain generate's."""
    return not torch.equal(ours(llava4, prompt=prompt)[0][:, :theirs.shape[1]], theirs)


def constant_per_step(mine_scores, their_scores):
    """pnd's scores (log-probabilities) are mitigv's (raw logits) plus one constant per step, with the same cut."""
    for mine, theirs in zip(mine_scores, their_scores):
        assert torch.equal(torch.isneginf(mine), torch.isneginf(theirs))
        kept = ~torch.isneginf(mine)
        shift = mine[kept] - theirs[kept]
        torch.testing.assert_close(shift, shift.mean().expand_as(shift), atol=1e-4, rtol=0)


def test_mitigvs_adapter_finds_no_decoder_layers_on_transformers_5(llava4):
    model, processor, image = llava4
    assert not hasattr(model, "language_model")  # transformers 5: model.model.language_model
    for name in ("pai", "only", "vista"):
        mitigator = build_mitigator(name, LlavaModelAdapter(model), LlavaProcessorAdapter(processor),
                                    do_sample=False, max_new_tokens=1)
        with pytest.raises(RuntimeError, match=r"language model with a (``|')\.layers"):
            mitigator.generate(image, LLAVA_PROMPT)
    layers = build_mitigator("only", LanguageLayers(model), processor)._language_model_layers()
    assert layers is model.model.language_model.layers and len(layers) == LAYERS


PAI_SETTINGS = [{}, dict(alpha=0.5, gamma=1.5, beta=0.05, start_layer=0, end_layer=3)]


@pytest.mark.parametrize("settings", PAI_SETTINGS)
def test_pai_same_tokens(llava4, eager, chat, settings):
    theirs, _, their_scores = peer(eager, "pai", chat, **settings)
    mine, out = ours(llava4, pnd.PAI(**settings), prompt=chat)
    same(mine, theirs)
    assert changed(llava4, theirs, chat)
    constant_per_step(out.scores, their_scores)


def test_pai_text_pass_on_llava_prompt(llava4, eager, chat):
    """On `<image>\\n` mitigv's text-only prompt has no newline, pnd's has: other scores where gamma != 1 (at the
    defaults: more than a constant apart from the first step), other tokens at gamma 3; at gamma 1 (no text pass)
    the same tokens."""
    model, processor, image = llava4
    _, mitigator, their_scores = peer(eager, "pai")
    assert processor.decode(mitigator._uncond_inputs["input_ids"][0]) == "USER: Describe the image. ASSISTANT:"
    inputs = processor(text=[LLAVA_PROMPT], images=[[image]], return_tensors="pt")
    text_only = inputs["input_ids"][0][inputs["input_ids"][0] != model.config.image_token_id]
    assert processor.decode(text_only) == "USER: \nDescribe the image. ASSISTANT:"  # pnd's text-only rows
    with pytest.raises(AssertionError):
        constant_per_step(ours(llava4, pnd.PAI())[1].scores[:1], their_scores[:1])
    theirs = peer(eager, "pai", gamma=3.0)[0]
    assert not torch.equal(ours(llava4, pnd.PAI(gamma=3.0))[0][:, :theirs.shape[1]], theirs)
    amplified = dict(alpha=5.0, gamma=1.0, start_layer=0)
    theirs = peer(eager, "pai", **amplified)[0]
    same(ours(llava4, pnd.PAI(**amplified))[0], theirs)
    assert changed(llava4, theirs, LLAVA_PROMPT)
    # Without whitespace after <image> the text-only prompts are the same tokens.
    inputs = processor(text=[chat], images=[[image]], return_tensors="pt")
    visual = inputs["input_ids"][0] == model.config.image_token_id
    assert torch.equal(peer(eager, "pai", chat)[1]._uncond_inputs["input_ids"][0], inputs["input_ids"][0][~visual])


def test_pai_on_an_sdpa_model_mitigvs_prefill_attends_ahead(llava4, eager, chat):
    """mitigv's patched eager attention gets no mask in an SDPA model's prefill: its patched layers see the whole
    prompt from every position. Its tokens then differ from its own on eager attention (pnd's) where a patched layer
    is not the last (at the defaults: layer 2 attends ahead, layer 3 reads its outputs); patching the last layer only,
    the newest query's row is all that is used, and they agree."""
    masks = []
    hook = llava4[0].model.language_model.layers[2].self_attn.register_forward_pre_hook(
        lambda module, args, kwargs: masks.append(kwargs.get("attention_mask")), with_kwargs=True)
    try:
        on_sdpa = peer(llava4, "pai", chat)[0]
    finally:
        hook.remove()
    assert masks[0] is None  # the prefill: no causal mask
    theirs = peer(eager, "pai", chat)[0]
    same(ours(llava4, pnd.PAI(), prompt=chat)[0], theirs)
    assert not torch.equal(on_sdpa, theirs)
    last = dict(alpha=1.0, gamma=1.0, start_layer=LAYERS - 1)
    same(peer(llava4, "pai", chat, **last)[0], peer(eager, "pai", chat, **last)[0])


ONLY_SETTINGS = [{}, dict(layer=1, alpha1=1.0, alpha2=2.0, gamma=0.5)]


@pytest.mark.parametrize("settings", ONLY_SETTINGS)
def test_only_same_tokens(llava4, chat, settings):
    """ONLY has no text-only pass: the same tokens on LLaVA-1.5's prompt and on the chat template's."""
    for prompt in (LLAVA_PROMPT, chat):
        theirs, _, their_scores = peer(llava4, "only", prompt, **settings)  # mitigv forces eager attention itself
        mine, out = ours(llava4, pnd.ONLY(**settings), prompt=prompt)
        same(mine, theirs)
        assert changed(llava4, theirs, prompt)
        constant_per_step(out.scores, their_scores)


@pytest.mark.parametrize("steer_strength", [None, 0.1])
def test_vista_same_tokens(llava4, chat, steer_strength):
    """Without whitespace after <image>: the same tokens, and the same scores up to one constant per step (pnd's the
    steered model's log-probabilities, mitigv's its logits)."""
    settings = {} if steer_strength is None else {"steer_strength": steer_strength}
    theirs, _, their_scores = peer(llava4, "vista", chat, **settings)
    mine, out = ours(llava4, pnd.VISTA(**settings), prompt=chat)
    same(mine, theirs)
    assert changed(llava4, theirs, chat)
    constant_per_step(out.scores, their_scores)


def test_vista_steering_vectors_on_llava_prompt(llava4, chat):
    """On `<image>\\n` mitigv's vectors subtract a text-only prompt without the newline, pnd's with it: other vectors,
    so other scores from the first step (at the defaults), other tokens at steer_strength 0.05."""
    _, mitigator, their_scores = peer(llava4, "vista")
    assert llava4[1].decode(mitigator._uncond_inputs["input_ids"][0]) == "USER: Describe the image. ASSISTANT:"
    assert (ours(llava4, pnd.VISTA())[1].scores[0] - their_scores[0]).abs().max() > 1e-2
    theirs = peer(llava4, "vista", steer_strength=0.05)[0]
    assert not torch.equal(ours(llava4, pnd.VISTA(steer_strength=0.05))[0][:, :theirs.shape[1]], theirs)
