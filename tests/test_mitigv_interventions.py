"""pnd's PAI, ONLY and VISTA against mitigv 0.1.7's (the packaged peer, written by others), greedy on a tiny LLaVA-1.5
through mitigv's `llava` backend, as tests/test_mitigv_peer.py does for VCD, ICD and M3ID.

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
mitigv combines raw logits, pnd log-probabilities (PAI, ONLY: one constant per step apart); VISTA's are both the
steered model's logits.
"""

import copy

import pytest
import torch

import pnd
from pnd.architectures.reported import bind_processor
from pnd.testing import random_video, sharpen_attention, tiny_model

mitigv = pytest.importorskip("mitigv")
from mitigv import build_mitigator  # noqa: E402
from mitigv.backends.llava import LlavaModelAdapter, LlavaProcessorAdapter  # noqa: E402
from test_mitigv_peer import CHAT, LLAVA_PROMPT, TOKENS, ours, same  # noqa: E402

LAYERS = 4  # PAI's default layers [2, 32): layers 2 and 3 amplified


class LanguageLayers(LlavaModelAdapter):
    """mitigv's LLaVA adapter, with the language model where mitigv looks for it (`_language_model_layers`: its
    `.layers`)."""

    @property
    def language_model(self):
        return self.model.model.language_model


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
def llava():
    """The attached model (pnd's side, and mitigv's ONLY and VISTA), its processor and the image."""
    model, processor = llava_layers()
    pnd.attach(model)
    return model, processor, random_video(0, frames=1, size=32)[0]


@pytest.fixture(scope="module")
def eager(llava):
    """The same weights in eager attention, never attached: mitigv's PAI side."""
    return llava_layers("eager")[0], *llava[1:]


@pytest.fixture(scope="module")
def chat(llava):
    """The chat template's prompt: no whitespace after `<image>`."""
    prompt = llava[1].apply_chat_template(CHAT, add_generation_prompt=True)
    assert "<image>Describe" in prompt
    return prompt


def peer(llava, name, prompt=LLAVA_PROMPT, **config):
    """mitigv's `name` run greedy on `prompt`: (its generated ids, the mitigator, its scores per step)."""
    model, processor, image = llava
    mitigator = build_mitigator(name, LanguageLayers(model), LlavaProcessorAdapter(processor), do_sample=False,
                                max_new_tokens=TOKENS, **config)
    mitigator._decode = lambda ids: ids  # its token ids, not text
    scores = []

    def sample_next(logits, cfg):
        scores.append(logits.clone())
        return type(mitigator)._sample_next(mitigator, logits, cfg)
    mitigator._sample_next = sample_next
    return mitigator.generate(image, prompt), mitigator, scores


def changed(llava, theirs, prompt):
    """The method changed the tokens: mitigv's are not plain generate's."""
    return not torch.equal(ours(llava, prompt=prompt)[0][:, :theirs.shape[1]], theirs)


def constant_per_step(mine_scores, their_scores):
    """pnd's scores (log-probabilities) are mitigv's (raw logits) plus one constant per step, with the same cut."""
    for mine, theirs in zip(mine_scores, their_scores):
        assert torch.equal(torch.isneginf(mine), torch.isneginf(theirs))
        kept = ~torch.isneginf(mine)
        shift = mine[kept] - theirs[kept]
        torch.testing.assert_close(shift, shift.mean().expand_as(shift), atol=1e-4, rtol=0)


def test_mitigvs_adapter_finds_no_decoder_layers_on_transformers_5(llava):
    model, processor, image = llava
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
def test_pai_same_tokens(llava, eager, chat, settings):
    theirs, _, their_scores = peer(eager, "pai", chat, **settings)
    mine, out = ours(llava, pnd.PAI(**settings), prompt=chat)
    same(mine, theirs)
    assert changed(llava, theirs, chat)
    constant_per_step(out.scores, their_scores)


def test_pai_text_pass_on_llava_prompt(llava, eager, chat):
    """On `<image>\\n` mitigv's text-only prompt has no newline, pnd's has: other scores where gamma != 1 (at the
    defaults: more than a constant apart from the first step), other tokens at gamma 3; at gamma 1 (no text pass)
    the same tokens."""
    model, processor, image = llava
    _, mitigator, their_scores = peer(eager, "pai")
    assert processor.decode(mitigator._uncond_inputs["input_ids"][0]) == "USER: Describe the image. ASSISTANT:"
    inputs = processor(text=[LLAVA_PROMPT], images=[[image]], return_tensors="pt")
    text_only = inputs["input_ids"][0][inputs["input_ids"][0] != model.config.image_token_id]
    assert processor.decode(text_only) == "USER: \nDescribe the image. ASSISTANT:"  # pnd's text-only rows
    with pytest.raises(AssertionError):
        constant_per_step(ours(llava, pnd.PAI())[1].scores[:1], their_scores[:1])
    theirs = peer(eager, "pai", gamma=3.0)[0]
    assert not torch.equal(ours(llava, pnd.PAI(gamma=3.0))[0][:, :theirs.shape[1]], theirs)
    amplified = dict(alpha=5.0, gamma=1.0, start_layer=0)
    theirs = peer(eager, "pai", **amplified)[0]
    same(ours(llava, pnd.PAI(**amplified))[0], theirs)
    assert changed(llava, theirs, LLAVA_PROMPT)
    # Without whitespace after <image> the text-only prompts are the same tokens.
    inputs = processor(text=[chat], images=[[image]], return_tensors="pt")
    visual = inputs["input_ids"][0] == model.config.image_token_id
    assert torch.equal(peer(eager, "pai", chat)[1]._uncond_inputs["input_ids"][0], inputs["input_ids"][0][~visual])


def test_pai_on_an_sdpa_model_mitigvs_prefill_attends_ahead(llava, eager, chat):
    """mitigv's patched eager attention gets no mask in an SDPA model's prefill: its patched layers see the whole
    prompt from every position. Its tokens then differ from its own on eager attention (pnd's) where a patched layer
    is not the last (at the defaults: layer 2 attends ahead, layer 3 reads its outputs); patching the last layer only,
    the newest query's row is all that is used, and they agree."""
    masks = []
    hook = llava[0].model.language_model.layers[2].self_attn.register_forward_pre_hook(
        lambda module, args, kwargs: masks.append(kwargs.get("attention_mask")), with_kwargs=True)
    try:
        on_sdpa = peer(llava, "pai", chat)[0]
    finally:
        hook.remove()
    assert masks[0] is None  # the prefill: no causal mask
    theirs = peer(eager, "pai", chat)[0]
    same(ours(llava, pnd.PAI(), prompt=chat)[0], theirs)
    assert not torch.equal(on_sdpa, theirs)
    last = dict(alpha=1.0, gamma=1.0, start_layer=LAYERS - 1)
    same(peer(llava, "pai", chat, **last)[0], peer(eager, "pai", chat, **last)[0])


ONLY_SETTINGS = [{}, dict(layer=1, alpha1=1.0, alpha2=2.0, gamma=0.5)]


@pytest.mark.parametrize("settings", ONLY_SETTINGS)
def test_only_same_tokens(llava, chat, settings):
    """ONLY has no text-only pass: the same tokens on LLaVA-1.5's prompt and on the chat template's."""
    for prompt in (LLAVA_PROMPT, chat):
        theirs, _, their_scores = peer(llava, "only", prompt, **settings)  # mitigv forces eager attention itself
        mine, out = ours(llava, pnd.ONLY(**settings), prompt=prompt)
        same(mine, theirs)
        assert changed(llava, theirs, prompt)
        constant_per_step(out.scores, their_scores)


@pytest.mark.parametrize("steer_strength", [None, 0.1])
def test_vista_same_tokens(llava, chat, steer_strength):
    """Without whitespace after <image>: the same tokens, and the same scores (both the steered model's logits)."""
    settings = {} if steer_strength is None else {"steer_strength": steer_strength}
    theirs, _, their_scores = peer(llava, "vista", chat, **settings)
    mine, out = ours(llava, pnd.VISTA(**settings), prompt=chat)
    same(mine, theirs)
    assert changed(llava, theirs, chat)
    for mine_step, theirs_step in zip(out.scores, their_scores):
        torch.testing.assert_close(mine_step, theirs_step, atol=1e-4, rtol=1e-4)


def test_vista_steering_vectors_on_llava_prompt(llava, chat):
    """On `<image>\\n` mitigv's vectors subtract a text-only prompt without the newline, pnd's with it: other vectors,
    so other scores from the first step (at the defaults), other tokens at steer_strength 0.05."""
    _, mitigator, their_scores = peer(llava, "vista")
    assert llava[1].decode(mitigator._uncond_inputs["input_ids"][0]) == "USER: Describe the image. ASSISTANT:"
    assert (ours(llava, pnd.VISTA())[1].scores[0] - their_scores[0]).abs().max() > 1e-2
    theirs = peer(llava, "vista", steer_strength=0.05)[0]
    assert not torch.equal(ours(llava, pnd.VISTA(steer_strength=0.05))[0][:, :theirs.shape[1]], theirs)
