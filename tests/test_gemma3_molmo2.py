"""Issue 13's Gemma 3 and Molmo2 pitfalls: the expansion around the image block, sliding-window layers,
bidirectional image blocks, Molmo2 video prompts (their timestamps read with the processor).

The decoding modes themselves (greedy, beam, sampling, left padding, alpha=0) are in tests/test_exactness.py.
"""

import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.attachment import attachment_of
from pnd.testing import tiny_inputs
from pnd.testing.reference import full_logits, visual_positions

from helpers import PROMPTS


def test_gemma3_prior_window_is_over_the_conditioned_slots(tiny):
    """The prior's sliding-window layers see the `window` slots before each token in the conditioned prompt (the
    image slots among them masked), as the brute-force masked forward does; a prefill on the text tokens side by
    side (the window over the text tokens alone) gives other logits. The prompts are longer than the window (where
    `lay_out_prior` crashed)."""
    model, processor = tiny("gemma3")
    inputs = tiny_inputs(processor, "gemma3", PROMPTS)
    config = model.config.text_config
    assert "sliding_attention" in config.layer_types and inputs["input_ids"].shape[1] > 2 * config.sliding_window
    prior = pnd.prior_logits(model, **inputs)
    torch.testing.assert_close(prior.float(), full_logits(model, inputs, inputs["input_ids"], prior=True),
                               atol=1e-4, rtol=0)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    kept = mask.bool() & ~visual_positions(model, ids)
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    side_by_side = []
    with torch.no_grad():
        for row in range(ids.shape[0]):
            hidden = model.model.language_model(input_ids=ids[row, kept[row]][None],
                                                position_ids=positions[row, kept[row]][None]).last_hidden_state
            side_by_side.append(model.lm_head(hidden[0, -1]))
    assert not torch.allclose(prior, torch.stack(side_by_side), atol=1e-2)


@pytest.mark.parametrize("model_type, block_input", [("gemma3", "token_type_ids"), ("molmo2", "mm_token_type_ids")])
def test_conditioned_prefill_attends_bidirectionally_in_the_image_block(tiny, model_type, block_input):
    """pnd's first forward gives the conditioned logits of the model's own forward (the image block attends both
    ways), which differ from a causal pass over the same tokens; the prefill is never packed for these families."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    assert not architecture_for(model).causal_prompt
    assert not pnd.decoding.packed.packs_prior(model, {"logits_to_keep": 1})
    out = pnd.attach(model).generate(**inputs, max_new_tokens=1, do_sample=False, output_logits=True,
                                     return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(0.5)])
    with torch.no_grad():
        own = model(**inputs).logits[:, -1]
        causal = model(**{k: v for k, v in inputs.items() if k != block_input}).logits[:, -1]
    torch.testing.assert_close(out.logits[0], own, atol=1e-4, rtol=0)
    assert not torch.allclose(own, causal, atol=1e-3)


def test_gemma3_prior_hides_the_newlines_around_the_image(tiny):
    """The prior equals the brute-force forward with the whole replacement hidden (`\\n\\n<start_of_image>…
    <end_of_image>\\n\\n`), not with the image tokens or the block alone hidden."""
    model, processor = tiny("gemma3")
    inputs = tiny_inputs(processor, "gemma3", PROMPTS)
    ids = inputs["input_ids"]
    prior = pnd.prior_logits(model, **inputs).float()
    config = model.config
    block = torch.zeros_like(ids, dtype=torch.bool)
    for row in range(ids.shape[0]):
        begin, end = (int((ids[row] == token).nonzero()[0, 0]) for token in (config.boi_token_id, config.eoi_token_id))
        block[row, begin : end + 1] = True
    for hidden in (ids == config.image_token_id, block):
        with torch.no_grad():
            leaky = model(**{**inputs, "attention_mask": inputs["attention_mask"] * ~hidden}).logits[:, -1]
        assert not torch.allclose(prior, leaky.float(), atol=1e-3)


@pytest.mark.parametrize("cut, match", [
    (lambda ids, config: ids[ids != config.eoi_token_id], "cannot be determined"),  # a block that never closes
    (lambda ids, config: ids[(ids == config.image_token_id).nonzero()[0, 0] :], "cannot be determined"),  # stray token
    (lambda ids, config: ids[(ids == config.boi_token_id).nonzero()[0, 0] :], "cannot be determined"),  # at the start
])
def test_gemma3_image_block_of_unknown_extent_is_an_error(tiny, cut, match):
    model, processor = tiny("gemma3")
    ids = tiny_inputs(processor, "gemma3", PROMPTS[:1])["input_ids"][0]
    with pytest.raises(ValueError, match=match):
        pnd.prior_logits(model, input_ids=cut(ids, model.config)[None])


def test_gemma3_text_prior_is_refused(tiny):
    model, processor = tiny("gemma3")
    with pytest.raises(ValueError, match="prior='text' is not supported on gemma3_text"):
        pnd.prior_logits(model, **tiny_inputs(processor, "gemma3", PROMPTS[:1]), mode="text")


def test_gemma3_returned_cache_is_the_conditioned_rows(tiny):
    """The cache generate returns is laid out as plain generate's (sliding-window layers hold the last slots and
    count every token seen: their attention masks depend on it) and holds a from-scratch forward's keys/values."""
    model, processor = tiny("gemma3")
    inputs = tiny_inputs(processor, "gemma3", PROMPTS)
    kwargs = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False, return_dict_in_generate=True)
    plain = model.generate(**inputs, **kwargs)
    out = pnd.attach(model).generate(**inputs, logits_processor=[pnd.PriorNormalized(0.5)], **kwargs)
    sequence = out.sequences[:, :-1]  # the last token was never fed to the model
    mask = torch.cat([inputs["attention_mask"], torch.ones_like(sequence[:, inputs["input_ids"].shape[1]:])], 1)
    types = torch.cat([inputs["token_type_ids"], torch.zeros_like(sequence[:, inputs["input_ids"].shape[1]:])], 1)
    with torch.no_grad():
        scratch = model(input_ids=sequence, attention_mask=mask, token_type_ids=types, use_cache=True,
                        position_ids=(mask.cumsum(-1) - 1).clamp(min=0), pixel_values=inputs["pixel_values"])
    for got, like, want in zip(out.past_key_values.layers, plain.past_key_values.layers, scratch.past_key_values.layers):
        assert type(got) is type(like) and got.keys.shape == like.keys.shape
        assert got.get_seq_length() == like.get_seq_length() == want.get_seq_length()
        kept = mask[:, -got.keys.shape[2]:].bool()
        torch.testing.assert_close(got.keys.transpose(1, 2)[kept], want.keys.transpose(1, 2)[kept], atol=1e-4, rtol=0)


def test_molmo2_prior_hides_both_image_views_with_their_ends(tiny):
    """The prior equals the brute-force forward with every token of the replacement hidden (the low- and
    high-resolution views, `<im_col>` and start/end tokens included), not with the `<im_patch>` tokens alone."""
    model, processor = tiny("molmo2")
    inputs = tiny_inputs(processor, "molmo2", PROMPTS)
    prior = pnd.prior_logits(model, **inputs).float()
    torch.testing.assert_close(prior, full_logits(model, inputs, inputs["input_ids"], prior=True), atol=1e-4, rtol=0)
    patches = inputs["input_ids"] == model.config.image_token_id
    with torch.no_grad():
        leaky = model(**{**inputs, "attention_mask": inputs["attention_mask"] * ~patches}).logits[:, -1]
    assert not torch.allclose(prior, leaky.float(), atol=1e-3)


def _molmo2_video_parts(processor, prompts=PROMPTS, before=""):
    """(chat texts, visual kwargs) for one 4-frame video at 2 fps per prompt (`before` written right before it)."""
    from pnd.io.prompts import video_prompt
    from pnd.testing import random_video

    texts = [video_prompt(processor, p).replace(processor.video_token, before + processor.video_token) for p in prompts]
    metadata = [{"fps": 2, "total_num_frames": 4, "frames_indices": [0, 1, 2, 3]}] * len(prompts)
    return texts, {"videos": [random_video(i) for i in range(len(prompts))], "video_metadata": metadata}


def _molmo2_video(processor, prompts=PROMPTS, before=""):
    """Processor outputs of `_molmo2_video_parts`, left-padded."""
    texts, visuals = _molmo2_video_parts(processor, prompts, before)
    return processor(text=texts, **visuals, return_tensors="pt", padding=True)


def test_molmo2_video_needs_its_processor(tiny):
    """Without the processor bound a video prompt is refused, naming pnd.attach(model, processor)."""
    model, processor = tiny("molmo2")
    inputs = _molmo2_video(processor, PROMPTS[:1])
    attachment_of(model).processor = None
    try:
        with pytest.raises(ValueError, match=r"pnd.attach\(model, processor\)"):
            pnd.prior_logits(model, **inputs)
        with pytest.raises(ValueError, match=r"pnd.attach\(model, processor\)"):
            architecture_for(model).expansion_mask(model.config, inputs["input_ids"])
    finally:
        pnd.attach(model, processor)


def test_molmo2_video_after_a_digit_is_found(tiny):
    """Template text ending in a digit right before the video (`12` + `0.0`, which a pattern reads `120.0`): the
    expansion is what the processor reports replacing, with or without a space in between."""
    from pnd.testing.reference import processor_expansion

    model, processor = tiny("molmo2")
    for before in ("clip 12", "clip 12 "):
        texts, visuals = _molmo2_video_parts(processor, PROMPTS[:1], before=before)
        ids, replaced = processor_expansion(processor, texts, **visuals)
        assert torch.equal(architecture_for(model).expansion(model, ids), replaced)


def test_molmo2_video_frames_as_image_blocks(tiny):
    """A processor with use_frame_special_tokens=False wraps each frame in `<im_start>…<im_end>`, as an image view:
    the mask is still the processor's replacement, timestamps included (read with the processor bound)."""
    import copy

    from pnd.testing.reference import processor_expansion

    model, processor = tiny("molmo2")
    plain_frames = copy.copy(processor)
    plain_frames.use_frame_special_tokens = False
    try:
        pnd.attach(model, plain_frames)  # before building the inputs: the bound processor reports their expansion
        texts, visuals = _molmo2_video_parts(plain_frames)
        ids, replaced = processor_expansion(plain_frames, texts, **visuals)
        assert not (ids == model.config.frame_start_token_id).any()
        assert torch.equal(architecture_for(model).expansion(model, ids), replaced)
    finally:
        pnd.attach(model, processor)


def test_molmo2_video_greedy_matches_brute_force(tiny):
    """A left-padded batch of video prompts: pnd's tokens and scores are the reference's, whose prior hides the
    timestamps, frame blocks and their ends."""
    from pnd.testing.reference import greedy

    model, processor = tiny("molmo2")
    inputs = _molmo2_video(processor)
    assert (inputs["attention_mask"] == 0).any()
    out = pnd.attach(model, processor).generate(**inputs, max_new_tokens=5, min_new_tokens=5, do_sample=False,
                                                output_scores=True, return_dict_in_generate=True,
                                                logits_processor=[pnd.PriorNormalized(0.7)])
    tokens, scores = greedy(model, inputs, 0.7, 5, banned=[model.generation_config.eos_token_id])
    assert torch.equal(out.sequences[:, -5:], tokens)
    for got, want in zip(out.scores, scores):
        finite = torch.isfinite(got)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)


def test_molmo2_video_beam_scores_are_reference_normalized_scores(tiny):
    """Beam search with num_return_sequences on a video prompt: each returned sequence's score is the reference's
    normalized log-probability of its tokens."""
    from pnd.testing.reference import forced_scores

    model, processor = tiny("molmo2")
    inputs = _molmo2_video(processor, PROMPTS[:1])
    prompt_len, eos = inputs["input_ids"].shape[1], model.generation_config.eos_token_id
    out = pnd.attach(model, processor).generate(**inputs, max_new_tokens=5, num_beams=3, num_return_sequences=2,
                                                length_penalty=1.0, do_sample=False, return_dict_in_generate=True,
                                                output_scores=True, logits_processor=[pnd.PriorNormalized(0.6)])
    assert out.sequences.shape[0] == 2
    for row in range(2):
        generated = out.sequences[row, prompt_len:]
        length = int((generated == eos).nonzero()[0, 0]) + 1 if (generated == eos).any() else len(generated)
        scores = forced_scores(model, inputs, generated[None, :length], 0.6)[0]
        total = scores.gather(1, generated[:length, None]).sum()
        torch.testing.assert_close(out.sequences_scores[row], total / length, atol=1e-4, rtol=0)


def test_molmo2_video_sampling_scores_are_reference_scores(tiny):
    """Sampling on a left-padded batch of video prompts: every step's scores are the reference's along the tokens
    drawn."""
    from pnd.testing.reference import forced_scores

    model, processor = tiny("molmo2")
    inputs = _molmo2_video(processor)
    torch.manual_seed(3)
    out = pnd.attach(model, processor).generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=True, top_k=0,
                                                return_dict_in_generate=True, output_scores=True,
                                                logits_processor=[pnd.PriorNormalized(0.5)])
    got = torch.stack(out.scores, 1)
    reference = forced_scores(model, inputs, out.sequences[:, inputs["input_ids"].shape[1]:], 0.5)
    finite = torch.isfinite(got)
    torch.testing.assert_close(got[finite], reference[finite], atol=1e-4, rtol=0)


@pytest.mark.parametrize("mode", [{}, {"num_beams": 3, "num_return_sequences": 2}])
def test_molmo2_video_alpha_zero_is_plain_generate(tiny, mode):
    model, processor = tiny("molmo2")
    inputs = _molmo2_video(processor)
    kwargs = dict(max_new_tokens=4, do_sample=False, return_dict_in_generate=True, output_scores=True, **mode)
    plain = model.generate(**inputs, **kwargs)
    ours = pnd.attach(model, processor).generate(**inputs, logits_processor=[pnd.PriorNormalized(0.0)], **kwargs)
    assert torch.equal(plain.sequences, ours.sequences)
    for a, b in zip(plain.scores, ours.scores):
        assert torch.equal(a, b)


@pytest.mark.parametrize("cut", [
    lambda ids, config: ids[ids != config.image_end_token_id],  # blocks that never close
    lambda ids, config: ids[(ids == config.image_token_id).nonzero()[0, 0] :],  # patches before any block start
])
def test_molmo2_image_block_of_unknown_extent_is_an_error(tiny, cut):
    model, processor = tiny("molmo2")
    ids = tiny_inputs(processor, "molmo2", PROMPTS[:1])["input_ids"][0]
    with pytest.raises(ValueError, match="(do not pair up|outside a Molmo2 image block)"):
        pnd.prior_logits(model, input_ids=cut(ids, model.config)[None])


def test_gemma3_eager_attention_matches_brute_force():
    """The prior's own call passes additive masks (the window over the conditioned slots), which eager attention adds
    to its scores as SDPA does: the same tokens as the reference."""
    from pnd.testing import tiny_model
    from pnd.testing.reference import greedy

    model, processor = tiny_model("gemma3")
    model.set_attn_implementation("eager")
    inputs = tiny_inputs(processor, "gemma3", PROMPTS)
    out = pnd.attach(model).generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                                     logits_processor=[pnd.PriorNormalized(0.7)])
    assert torch.equal(out[:, -4:], greedy(model, inputs, 0.7, 4, banned=[model.generation_config.eos_token_id])[0])


@pytest.mark.parametrize("model_type", ["gemma3", "molmo2"])
def test_frames_as_images_match_brute_force(tiny, model_type):
    """A video's frames as images (neither processor takes video here): several image blocks in one prompt, each
    hidden whole, text between them kept."""
    from pnd.testing import random_video
    from pnd.testing.reference import greedy

    model, processor = tiny(model_type)
    content = [{"type": "image"}, {"type": "text", "text": "then"}, {"type": "image"}, {"type": "text", "text": PROMPTS[0]}]
    text = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
    inputs = processor(text=[text], images=[list(random_video(3, frames=2, size=64))], return_tensors="pt")
    visual = visual_positions(model, inputs["input_ids"])
    assert int((visual[0, 1:] & ~visual[0, :-1]).sum()) == 2  # two hidden blocks
    out = pnd.attach(model).generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                                     logits_processor=[pnd.PriorNormalized(0.7)])
    assert torch.equal(out[:, -4:], greedy(model, inputs, 0.7, 4, banned=[model.generation_config.eos_token_id])[0])
