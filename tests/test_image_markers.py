"""Families whose image span has begin/end markers besides its placeholders: Chameleon's discrete VQ tokens between
`<racm3:break>` and `<eoss>`, Idefics2's `<fake_token_around_image>` blocks. The prior hides the whole span, markers
included (docs/design.md §1)."""

import pytest
import torch

import pnd
from pnd.architectures.idefics2 import written
from pnd.io.prompts import video_prompt
from pnd.testing import random_video
from pnd.testing.reference import full_logits, placeholder_positions

MARKERS = {"chameleon": ("<racm3:break>", "<eoss>"), "idefics2": ("<fake_token_around_image>",),
           "emu3": ("<|image start|>", "<|image end|>"), "janus": ("<begin_of_image>", "<end_of_image>")}


@pytest.mark.parametrize("model_type", sorted(MARKERS))
def test_prior_hides_the_image_span_and_its_markers(tiny, model_type):
    """The expansion holds the span's markers; the prior is the brute-force one (every token of the span and its
    markers masked out); a prior that sees the markers (the image placeholders alone masked) differs."""
    model, processor = tiny(model_type)
    pnd.attach(model, processor)
    inputs = processor(text=[video_prompt(processor, "Describe the image.", "image")],
                       images=[[random_video(0, frames=1, size=32)[0]]], return_tensors="pt")
    ids, expansion = inputs["input_ids"], inputs["visual_expansion_mask"].bool()
    markers = torch.isin(ids, torch.tensor(processor.tokenizer.convert_tokens_to_ids(list(MARKERS[model_type]))))
    assert markers.sum() == 2 and (expansion & markers).sum() == 2
    prior = pnd.prior_logits(model, **inputs).float()
    torch.testing.assert_close(prior, full_logits(model, inputs, ids, prior=True), atol=1e-4, rtol=0)
    positions = pnd.decoding.prior.default_position_ids(model, **inputs)
    seen = inputs["attention_mask"] * ~placeholder_positions(model, ids)
    with torch.no_grad():
        leaky = model(input_ids=ids, attention_mask=seen, position_ids=positions).logits[:, -1].float()
    assert not torch.allclose(prior, leaky, atol=1e-3)


def test_idefics2_expansion_holds_the_word_its_space_merges_into(tiny):
    """`<image>Describe` becomes `<fake_token_around_image> Describe`: the token ` Describe` exists only through the
    processor's space, so it is in the expansion; the next word is not."""
    model, processor = tiny("idefics2")
    pnd.attach(model, processor)
    inputs = processor(text=[video_prompt(processor, "Describe the image.", "image")],
                       images=[[random_video(0, frames=1, size=32)[0]]], return_tensors="pt")
    tokens = processor.tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    hidden = inputs["visual_expansion_mask"][0].bool().tolist()
    after = len(tokens) - 1 - tokens[::-1].index("<fake_token_around_image>") + 1
    assert tokens[after : after + 2] == ["ĠDescribe", "Ġthe"] and hidden[after] and not hidden[after + 1]


@pytest.mark.parametrize("splitting", [False, True])
def test_idefics2_rewrites_the_prompt_as_its_processor_does(splitting):
    """Two adjacent images, one before a word and one before a space (no space added there), with and without image
    splitting (5 blocks an image, adjacent fake tokens merged): `written` builds the processor's own prompt, and its
    spans cover every fake and image token and no other."""
    from pnd.testing.builders.idefics2 import build

    _, processor = build(0, do_image_splitting=splitting)
    texts = ["User:<image><image>Describe it.", "User:<image> What is it?<image>"]
    images = [[random_video(i, frames=1, size=32)[0]] * 2 for i in range(2)]
    inputs = processor(text=texts, images=images, return_offsets_mapping=True, padding=True)
    built, spans = written(processor, texts)
    special = {processor.fake_image_token, processor.image_token}
    for row, (text, words) in enumerate(zip(built, (["ĠDescribe"], []))):
        kept = [k for k, a in enumerate(inputs["attention_mask"][row]) if a]
        ids = [inputs["input_ids"][row][k] for k in kept]
        assert processor.tokenizer.decode(ids) == text
        covered = {c for r in spans[row] for c in range(*r["new_span"])}
        held = [t for t, k in zip(processor.tokenizer.convert_ids_to_tokens(ids), kept)
                if any(c in covered for c in range(*inputs["offset_mapping"][row][k]))]
        assert [t for t in held if t not in special] == words  # the word the processor's space merges into
        fake = processor.tokenizer.convert_tokens_to_ids(processor.fake_image_token)
        assert held.count(processor.fake_image_token) == ids.count(fake) > 2
        assert held.count(processor.image_token) == ids.count(processor.image_token_id) == 2 * 4 * (5 if splitting else 1)


def test_janus_generate_keeps_the_logits_processor_and_detach_restores_it(tiny):
    """Janus's own `generate` drops `logits_processor` in text mode: attached, the prior changes the tokens (as the
    brute-force tests check); detached, the model's `generate` is its class's again."""
    from pnd.testing import tiny_inputs

    model, processor = tiny("janus")
    inputs = tiny_inputs(processor, "janus")
    plain = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    pnd.attach(model, processor)
    normalized = model.generate(**tiny_inputs(processor, "janus"), max_new_tokens=6, do_sample=False,
                                logits_processor=[pnd.PriorNormalized(1.0)])
    assert not torch.equal(plain, normalized)
    pnd.detach(model)
    assert "generate" not in vars(model)


def test_janus_generate_of_its_own_on_the_instance_is_wrapped_and_restored(tiny):
    """A `generate` set on the instance (a user's or a library's wrapper of Janus's own) does not keep pnd from
    keeping the logits processor: the tokens are those of the model without it; image generation still goes through
    it, and `pnd.detach` puts it back."""
    from pnd.testing import tiny_inputs

    model, processor = tiny("janus")
    inputs = tiny_inputs(processor, "janus")
    pnd.attach(model, processor)
    expected = model.generate(**inputs, max_new_tokens=6, do_sample=False, logits_processor=[pnd.PriorNormalized(1.0)])
    pnd.detach(model)

    def own(*args, generation_mode="text", **kwargs):  # image mode: a stand-in (the tiny model has no image config)
        return "image" if generation_mode == "image" else type(model).generate(model, *args, **kwargs)

    model.generate = own
    pnd.attach(model, processor)
    normalized = model.generate(**inputs, max_new_tokens=6, do_sample=False,
                                logits_processor=[pnd.PriorNormalized(1.0)])
    assert torch.equal(normalized, expected)
    assert model.generate(**inputs, generation_mode="image") == "image"
    pnd.detach(model)
    assert vars(model)["generate"] is own
