"""CaptionScorer refuses, before any forward, what the model refuses or what `score` and `PriorNormalized` refuse."""

import math
import re

import pytest
import torch

import pnd
from pnd.testing import random_video

VIDEO = random_video(0)


def placeholder_tokens(model, processor) -> list[str]:
    """The text of each image/video token the model's config names (`image_token_id`, `video_token_id`)."""
    ids = [getattr(model.config, key, None) for key in ("image_token_id", "video_token_id")]
    return [processor.tokenizer.convert_ids_to_tokens(i) for i in ids if i is not None]


@pytest.mark.parametrize("model_type, modality", [
    ("llava_onevision", "video"), ("qwen2_vl", "video"), ("qwen3_vl", "video"), ("qwen3_5", "video"),
    ("gemma3", "image"), ("internvl", "video"), ("smolvlm", "video"),
])
def test_a_caption_holding_a_visual_placeholder_is_refused(tiny, model_type, modality):
    """The model refuses a sequence with more placeholders than visual features ("Video features and video tokens do
    not match"), so such a caption's score could not be two plain forwards: every entry point refuses it."""
    model, processor = tiny(model_type)
    visual = VIDEO if modality == "video" else VIDEO[0]
    scorer = pnd.CaptionScorer(model, processor, modality=modality)
    tokens = placeholder_tokens(model, processor)
    assert tokens
    for token in tokens:
        caption = f"a {token} b"
        assert processor.tokenizer.convert_tokens_to_ids(token) in processor.tokenizer(caption).input_ids
        for call in (lambda: scorer.score([visual], ["a cat", caption]),
                     lambda: scorer.token_scores(visual, caption),
                     lambda: scorer.build_inputs(visual, caption)):
            with pytest.raises(ValueError, match=f"Caption {re.escape(repr(caption))} holds .*{re.escape(token)}"):
                call()


def test_token_scores_refuse_a_caption_past_the_model_positions(tiny):
    model, processor = tiny("llava_onevision")
    scorer = pnd.CaptionScorer(model, processor)
    limit = model.config.get_text_config(decoder=True).max_position_embeddings
    prompt = processor(text=[scorer.prompt_text], videos=[VIDEO], return_tensors="pt")
    caption = "a" * (limit - prompt["input_ids"].shape[1] + 1)
    assert prompt["input_ids"].shape[1] + len(processor.tokenizer(caption, add_special_tokens=False).input_ids) > limit
    with pytest.raises(ValueError, match="max_position_embeddings"):
        scorer.score([VIDEO], [caption])
    with pytest.raises(ValueError, match="max_position_embeddings"):
        scorer.token_scores(VIDEO, caption)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        scorer.prompt_token_scores(prompt, [processor.tokenizer.convert_tokens_to_ids("a")] * limit)


@pytest.mark.parametrize("plausibility", [0.0, -0.1, 2.0, math.nan, math.inf, True, "0.5"])
def test_prompt_token_scores_refuse_a_plausibility_prior_normalized_refuses(tiny, plausibility):
    with pytest.raises(ValueError, match=r"plausibility must be None or a number in \(0, 1\]"):
        pnd.PriorNormalized(0.5, plausibility=plausibility)
    model, processor = tiny("llava_onevision")
    scorer = pnd.CaptionScorer(model, processor)
    prompt = processor(text=[scorer.prompt_text], videos=[VIDEO], return_tensors="pt")
    with pytest.raises(ValueError, match=r"plausibility must be None or a number in \(0, 1\]"):
        scorer.prompt_token_scores(prompt, [69], plausibility=plausibility)


def test_prompt_token_scores_refuse_no_token_ids(tiny):
    model, processor = tiny("llava_onevision")
    scorer = pnd.CaptionScorer(model, processor)
    prompt = processor(text=[scorer.prompt_text], videos=[VIDEO], return_tensors="pt")
    with pytest.raises(ValueError, match="token_ids is empty"):
        scorer.prompt_token_scores(prompt, [])


@pytest.mark.parametrize("argument, value", [
    ("batch_size", True), ("batch_size", 2.0), ("batch_size", "4"), ("batch_size", 0),
    ("pack_captions", "no"), ("pack_captions", 1), ("pack_captions", None),
])
def test_constructor_refuses_a_wrong_type(tiny, argument, value):
    model, processor = tiny("llava_onevision")
    with pytest.raises(ValueError, match=rf"{argument} must be .*, got {value!r}"):
        pnd.CaptionScorer(model, processor, **{argument: value})


def test_token_scores_at_alpha_zero_are_the_plain_models_whatever_the_plausibility():
    """At alpha 0 pnd's processor is plain `generate` for every argument, its plausibility cut too; the per-token view
    shows the same: the normalized scores are the conditional log-probabilities, none cut to -inf."""
    from pnd.scoring.tokens import score_tokens

    conditional = torch.log_softmax(torch.tensor([[3.0, 0.0, -2.0], [0.0, 1.0, 5.0]]), -1)
    prior = torch.log_softmax(torch.tensor([[1.0, 1.0, 0.0], [2.0, 0.0, 0.0]]), -1)
    plain = score_tokens(conditional, prior, [1, 0], alpha=0.0, decode=str, plausibility=0.5)
    assert [s.normalized for s in plain] == [conditional[0, 1].item(), conditional[1, 0].item()]
    cut = score_tokens(conditional, prior, [1, 0], alpha=0.5, decode=str, plausibility=0.5)
    assert [s.normalized for s in cut] == [float("-inf"), float("-inf")]  # p below half the top one's: cut
