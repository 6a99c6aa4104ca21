"""pnd's VCD, ICD and M3ID against mitigv 0.1.7's (the packaged peer, written by others), greedy on a tiny LLaVA-1.5.

Where the definitions agree the tokens are the same; where they differ by construction (docs/methods.md, "pnd and
mitigv") the test shows the difference and the configuration of pnd that gives mitigv's tokens.
"""

import pytest
import torch

import pnd
from pnd.decoding.methods import method
from pnd.testing import random_video, tiny_model

mitigv = pytest.importorskip("mitigv")
from mitigv import build_mitigator  # noqa: E402
from mitigv.backends.llava import LlavaModelAdapter, LlavaProcessorAdapter  # noqa: E402

TOKENS = 10
LLAVA_PROMPT = "USER: <image>\nDescribe the image. ASSISTANT:"  # LLaVA-1.5's template: whitespace after <image>
GATE = 0.01  # near the tiny model's top probabilities: the gate opens at some steps only
CHAT = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}]


@pytest.fixture(scope="module")
def llava():
    model, processor = tiny_model("llava")
    pnd.attach(model)
    return model, processor, random_video(0, frames=1, size=32)[0]


def peer(llava, name, prompt=LLAVA_PROMPT, **config):
    """mitigv's `name` run greedy on `prompt`: (its generated ids, the mitigator, its scores per step); the
    mitigator's `forwards` holds the next-token logits of each forward it ran."""
    model, processor, image = llava
    mitigator = build_mitigator(name, LlavaModelAdapter(model), LlavaProcessorAdapter(processor), do_sample=False,
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
