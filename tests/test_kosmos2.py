"""Kosmos-2 (`pnd/architectures/kosmos2.py`): what transformers does that pnd's registration handles (checked on
transformers itself), and each mechanism failing the reference when it is wrong."""

import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.architectures.kosmos2 import Kosmos2Architecture
from pnd.testing import tiny_inputs
from pnd.testing.reference import greedy, visual_positions

from helpers import PROMPTS

STEPS = 5


def _kosmos2():
    import importlib

    return importlib.import_module("pnd.testing.builders.kosmos-2").build(0)


def _image(seed=0):
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.RandomState(seed).randint(0, 255, (32, 32, 3), dtype=np.uint8))


def test_kosmos2_expansion_is_the_image_tags_and_the_latent_query_slots_between():
    """What a rule bounded by `<image>`…`</image>` would hide: the processor writes `<s><image>`, one ordinary
    vocabulary id per latent query (the ids after `<unk>`), `</image>`; `image_embeds_position_mask` marks those slots."""
    model, processor = _kosmos2()
    out = processor(text=["<grounding> An image of"], images=[_image()], return_tensors="pt")
    ids, slots = out["input_ids"][0], out["image_embeds_position_mask"][0].bool()
    tokens = processor.tokenizer.convert_ids_to_tokens(ids)
    queries = model.config.latent_query_num
    assert tokens[:2] == ["<s>", "<image>"] and tokens[2 + queries] == "</image>"
    assert slots.nonzero().flatten().tolist() == list(range(2, 2 + queries))
    assert ids[slots].tolist() == list(range(processor.tokenizer.unk_token_id + 1,
                                             processor.tokenizer.unk_token_id + 1 + queries))


def test_kosmos2_left_padded_rows_decode_otherwise_than_alone_in_transformers():
    """transformers' own Kosmos-2 numbers a prompt's positions from its first non-pad token, but a decoding step's
    position from the cache length, which counts the left padding: from the second generated token on, a padded row
    decodes otherwise than the same prompt alone (plain generate, no pnd)."""
    model, processor = _kosmos2()
    kwargs = dict(max_new_tokens=4, do_sample=False, output_scores=True, return_dict_in_generate=True)
    prompts = ["<grounding> An image of", "a much longer prompt about a red square here"]
    padded = model.generate(**processor(text=prompts, images=[_image(), _image()], return_tensors="pt",
                                        padding=True), **kwargs)
    alone = model.generate(**processor(text=prompts[:1], images=[_image()], return_tensors="pt"), **kwargs)
    assert torch.allclose(padded.scores[0][0], alone.scores[0][0], atol=1e-5)  # the prompt: the same positions
    assert not torch.allclose(padded.scores[1][0], alone.scores[1][0], atol=1e-2)  # a step: pad slots counted


def test_kosmos2_forward_requires_the_image():
    """The prior's own prefill runs the model on token ids alone, which Kosmos-2's forward refuses (`prepare` lets it
    run as the text model)."""
    model, processor = _kosmos2()
    out = processor(text=["<grounding> An image of"], images=[_image()], return_tensors="pt")
    with pytest.raises(ValueError, match="either `pixel_values` or `image_embeds`"):
        model(input_ids=out["input_ids"], attention_mask=out["attention_mask"])


def test_kosmos2_generate_hands_its_forward_no_position_ids():
    """What `Kosmos2Architecture.step_positions` fills in for pnd's paired calls."""
    model, _ = _kosmos2()
    ids = torch.tensor([[1, 5, 6, 7]])
    inputs = model.text_model.prepare_inputs_for_generation(ids, attention_mask=torch.ones_like(ids), use_cache=True,
                                                            is_first_iteration=True)
    assert "position_ids" not in inputs


def test_kosmos2_rule_equals_the_reference_reading(tiny):
    """The rule (after `<s>`: a token, `latent_query_num` consecutive ids, a token) and the reference's reading of the
    decoded text (`<image>`…`</image>`) agree on a left-padded batch; every row has its expansion."""
    model, processor = tiny("kosmos-2")
    inputs = tiny_inputs(processor, "kosmos-2", PROMPTS, image=True)
    found = architecture_for(model).expansion(model, inputs["input_ids"], inputs["attention_mask"])
    assert (inputs["attention_mask"] == 0).any()
    assert torch.equal(found, visual_positions(model, inputs["input_ids"]))
    assert found.sum(-1).tolist() == [model.config.latent_query_num + 2] * len(PROMPTS)


def _transformers_steps(model, attention_mask, length):
    """transformers' own decoding-step numbering: the cache length, padding slots counted."""
    pad = model.config.text_config.pad_token_id
    return torch.arange(attention_mask.shape[1] - length, attention_mask.shape[1]).expand(
        attention_mask.shape[0], -1) + 1 + pad


@pytest.mark.parametrize("wrong", [None, "padding counted", "no offset"])
@pytest.mark.parametrize("model_type", ["kosmos-2", "kosmos-2.5"])
def test_kosmos2_greedy_fails_the_reference_with_other_positions(tiny, monkeypatch, model_type, wrong):
    """Normalized greedy decoding of a left-padded batch equals the reference (each prompt's positions from its padding
    id on, pads skipped); numbering the steps as transformers does (padding counted) or without the padding id's
    offset changes the tokens or the scores. Kosmos-2.5 numbers its prompts the same way."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=True)
    right = Kosmos2Architecture.step_positions
    if wrong == "padding counted":
        monkeypatch.setattr(Kosmos2Architecture, "step_positions", lambda self, model, mask, length: (
            right(self, model, mask, length) if length > 1 else _transformers_steps(model, mask, length)))
    elif wrong == "no offset":
        monkeypatch.setattr(Kosmos2Architecture, "step_positions", lambda self, model, mask, length: (
            right(self, model, mask, length) - model.config.text_config.pad_token_id - 1).clamp(min=0))
    out = pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, output_scores=True,
        return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.7)])
    eos = model.generation_config.eos_token_id
    tokens, scores = greedy(model, inputs, 0.7, STEPS, banned=[eos] if isinstance(eos, int) else eos)
    finite = [torch.isfinite(got) for got in out.scores]  # min_new_tokens: the end token at -inf in both
    same = torch.equal(out.sequences[:, -STEPS:], tokens) and all(
        torch.allclose(got[f], want[f], atol=1e-4) for got, want, f in zip(out.scores, scores, finite))
    assert same == (wrong is None)


def test_kosmos2_text_prior_is_the_prompt_without_its_image(tiny):
    """prior="text" (M3ID's default): the kept tokens renumbered as Kosmos-2 numbers a prompt by itself, from its
    padding id + 1 (`Kosmos2Architecture.first_position`), on each row of a left-padded batch and through decoding."""
    from pnd.testing.reference import full_logits

    model, processor = tiny("kosmos-2")
    batch = tiny_inputs(processor, "kosmos-2", PROMPTS, image=True)
    visual = visual_positions(model, batch["input_ids"])
    got = pnd.prior_logits(model, **batch, mode="text")
    for row in range(len(PROMPTS)):
        text_only = batch["input_ids"][row][batch["attention_mask"][row].bool() & ~visual[row]][None]
        with torch.no_grad():
            want = model.text_model(input_ids=text_only).logits[:, -1]  # transformers numbers it itself
        torch.testing.assert_close(got[row : row + 1], want, atol=1e-4, rtol=0)
    inputs = tiny_inputs(processor, "kosmos-2", PROMPTS[:1], image=True)
    out = pnd.attach(model, processor).generate(
        **inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, output_scores=True,
        return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(1.0, prior="text")])
    ids, text_only = inputs["input_ids"], inputs["input_ids"][~visual_positions(model, inputs["input_ids"])][None]
    for scores in out.scores:
        generated = ids[:, inputs["input_ids"].shape[1]:]
        with torch.no_grad():
            prior = torch.log_softmax(model.text_model(input_ids=torch.cat([text_only, generated], 1)).logits[:, -1], -1)
        cond = torch.log_softmax(full_logits(model, inputs, ids, prior=False), -1)
        finite = torch.isfinite(scores)  # min_new_tokens bans the end token
        torch.testing.assert_close(scores[finite], (cond - prior)[finite], atol=1e-4, rtol=0)
        ids = torch.cat([ids, (cond - prior).argmax(-1, keepdim=True)], 1)


def test_kosmos2_detach_takes_back_its_repairs():
    """attach repairs the model's forward, wraps its text model's and lets its decoder take 4-D masks; detach takes
    all three back (tests/test_attachment.py checks the forwards on every patched family)."""
    from pnd.testing import tiny_model

    model, processor = tiny_model("kosmos-2")
    mask_repair = "_prepare_decoder_attention_mask"
    pnd.attach(model, processor)
    assert "forward" in vars(model) and "forward" in vars(model.text_model) and mask_repair in vars(model.text_model.model)
    pnd.detach(model)
    assert "forward" not in vars(model) and "forward" not in vars(model.text_model)
    assert mask_repair not in vars(model.text_model.model)


def test_kosmos2_static_cache_fails_in_transformers_and_is_refused(tiny):
    """Plain `generate(cache_implementation="static")` fails in transformers 5.23's Kosmos-2 (its attention mask spans
    the tokens, not the cache's slots); pnd refuses it at alpha > 0 instead of decoding on it."""
    model, processor = tiny("kosmos-2")
    inputs = tiny_inputs(processor, "kosmos-2", PROMPTS[:1], image=True)
    with pytest.raises(RuntimeError, match="must match the size"):
        model.generate(**inputs, max_new_tokens=2, cache_implementation="static")
    with pytest.raises(ValueError, match="does not support a static cache on Kosmos-2"):
        pnd.attach(model, processor).generate(**inputs, max_new_tokens=2, cache_implementation="static",
                                              logits_processor=[pnd.PriorNormalized(0.5)])
    with pytest.raises(ValueError, match="^PAI does not support a static cache on Kosmos-2"):  # the method passed
        model.generate(**inputs, max_new_tokens=2, cache_implementation="static", logits_processor=[pnd.PAI()])


def test_kosmos2_5_generate_drops_the_position_ids(tiny):
    """Kosmos-2.5's `prepare_inputs_for_generation` drops the position ids (its sinusoidal positions are derived inside
    from the padding tokens and the cache length), as Kosmos-2's generate passes none: pnd's paired calls number the
    steps by `step_positions` (the test above fails with transformers' numbering)."""
    model, _ = tiny("kosmos-2.5")
    ids = torch.tensor([[0, 5, 6, 7]])
    inputs = model.prepare_inputs_for_generation(ids, attention_mask=torch.ones_like(ids), use_cache=True,
                                                 position_ids=torch.arange(4)[None], is_first_iteration=True)
    assert "position_ids" not in inputs


@pytest.mark.parametrize("repaired", [True, False])
def test_kosmos2_5_padded_rows_get_their_own_image_slots(tiny, monkeypatch, repaired):
    """transformers 5.23's Kosmos-2.5 processor writes `image_embeds_position_mask` as if no row were padded, so in a
    left-padded batch the image features land on a padded row's padding and first text tokens. pnd's forward marks
    each row's own slots: the processor's padded batch decodes as each prompt alone (the single prompts' masks are
    right), and differs without the repair."""
    from pnd.architectures.kosmos2 import Kosmos2_5Architecture
    from pnd.io.prompts import video_prompt
    from pnd.testing import random_video

    model, processor = tiny("kosmos-2.5")
    if not repaired:
        monkeypatch.setattr(Kosmos2_5Architecture, "prepare", lambda self, model: None)
    texts = [video_prompt(processor, p, "image") for p in PROMPTS]
    images = [random_video(i, frames=1)[0] for i in range(len(PROMPTS))]
    batch = processor(text=texts, images=images, return_tensors="pt", padding=True)
    assert not batch["attention_mask"][0].all() and torch.equal(*batch["image_embeds_position_mask"])  # one mask
    kwargs = dict(max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, output_scores=True,
                  return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.7)])
    attached = pnd.attach(model, processor)
    together = attached.generate(**batch, **kwargs)
    alone = attached.generate(**processor(text=texts[:1], images=images[:1], return_tensors="pt"), **kwargs)
    same = torch.equal(together.sequences[0, -STEPS:], alone.sequences[0, -STEPS:]) and all(
        torch.allclose(a[0][torch.isfinite(b[0])], b[0][torch.isfinite(b[0])], atol=1e-4)
        for a, b in zip(together.scores, alone.scores))
    assert same == repaired
