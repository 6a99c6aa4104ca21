"""docs/design.md §3.5: a retrieval score equals two plain teacher-forced forwards and PriorNormalized's steps."""

import pytest
import torch
from transformers import LogitsProcessor

import pnd
from pnd.testing import FINDER_IMAGE_ARCHITECTURES, FINDER_VIDEO_ARCHITECTURES, random_video
from pnd.testing.reference import (
    SUFFIX_TYPE,
    TOKEN_TYPES,
    conditioned_positions,
    is_hybrid,
    kept_tokens_forward,
    visual_positions,
    window_masks,
)

from helpers import on_device

CAPTIONS = ["a red circle moves left", "a blue square", "the cat sat on the mat and the dog ran"]
VIDEOS = [random_video(0), random_video(1), random_video(2)]


@torch.no_grad()
def teacher_forced(model, inputs, prior):
    """Summed log-probability of the caption span: one plain forward (conditioned, or visual-masked; with recurrent
    layers, on the kept tokens alone); the caption in Unlimited-OCR's window of generated tokens (`window_masks`). On
    the CPU, as CaptionScorer's scores are."""
    start, end = inputs.caption_span
    assert "caption_span" not in inputs and inputs.get("caption_span") is None  # model inputs only
    if prior:
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        positions = conditioned_positions(model, ids, mask, inputs)
        kept = mask.bool() & ~visual_positions(model, ids)
        if is_hybrid(model):
            kept_logits = kept_tokens_forward(model, ids, kept, positions)[0].logits[0]
            vocabulary = kept_logits.shape[-1]  # the forward's (Inkling's cut head)
            logits = kept_logits.new_zeros(*ids.shape, vocabulary)
            logits[kept] = kept_logits
        else:  # the prior's tokens are text: token-type inputs 0 (a prefix LM's: its prompt and suffix types)
            text = {k: inputs[k] * 0 for k in TOKEN_TYPES if k in inputs and model.config.model_type not in SUFFIX_TYPE}
            logits = model(**{**inputs, **text, "attention_mask": window_masks(model, mask * kept, start)},
                           position_ids=positions).logits
    else:
        logits = model(**{**inputs, "attention_mask": window_masks(model, inputs["attention_mask"], start)}).logits
    ids = inputs["input_ids"]
    logprobs = torch.log_softmax(logits[0, start - 1 : end - 1].float(), -1)
    return logprobs.gather(1, ids[0, start:end, None]).sum().cpu()


@pytest.mark.parametrize("model_type, prior_mode, modality", [
    *((t, mode, "video") for t in ("llava_onevision", "qwen2_vl", "qwen3_vl", "glm4v", "video_llava", "perception_lm",
                                   "qwen3_5", "internvl", "smolvlm", "video_llama_3", "minicpmv4_6",
                                   "minicpmv4_7")
      for mode in ("masked", "text")),
    ("gemma3", "masked", "image"),  # images only; prior="text" is refused on sliding-window models
    *(("lfm2_vl", mode, "image") for mode in ("masked", "text")),  # images only; a hybrid (short convolutions)
    *(("molmo2", mode, modality) for mode in ("masked", "text") for modality in ("image", "video")),
    # through the generic finder
    *((t, "masked", "video") for t in FINDER_VIDEO_ARCHITECTURES),
    *((t, "masked", "image") for t in FINDER_IMAGE_ARCHITECTURES),
    # slot-anchored sparse layers: the prior in the prompt's slots, the reference on the kept tokens alone
    *(("minimax_m3_vl", "masked", modality) for modality in ("video", "image")),
])
def test_scores_equal_teacher_forced_forwards(tiny, model_type, prior_mode, modality):
    model, processor = tiny(model_type)
    visuals = VIDEOS[:2] if modality == "video" else [video[0] for video in VIDEOS[:2]]
    scorer = pnd.CaptionScorer(model, processor, alpha=0.8, reduction="sum", prior=prior_mode, batch_size=2,
                               modality=modality)
    parts = scorer.score(visuals, CAPTIONS, return_parts=True)
    for v, video in enumerate(visuals):
        for c, caption in enumerate(CAPTIONS):
            inputs = scorer.build_inputs(video, caption)
            cond = teacher_forced(model, inputs, prior=False)
            torch.testing.assert_close(parts.conditional[v, c], cond, atol=1e-4, rtol=0)
            if prior_mode == "masked":
                prior = teacher_forced(model, inputs, prior=True)
                torch.testing.assert_close(parts.prior[v, c], prior, atol=1e-4, rtol=0)
                torch.testing.assert_close(parts.normalized[v, c], cond - 0.8 * prior, atol=1e-4, rtol=0)


def test_videos_given_as_files(tiny, tmp_path):
    from pnd.io.video import read_video

    from helpers import write_mp4

    model, processor = tiny("llava_onevision")
    write_mp4(tmp_path / "clip.mp4", 6)
    scorer = pnd.CaptionScorer(model, processor, frames=4)
    with pytest.warns(DeprecationWarning, match=r"pass frames, pnd.io.video.read_video"):
        from_file = scorer.score([tmp_path / "clip.mp4"], CAPTIONS)
    torch.testing.assert_close(from_file, scorer.score([read_video(tmp_path / "clip.mp4", 4)], CAPTIONS))
    assert scorer.build_inputs(str(tmp_path / "clip.mp4"), CAPTIONS[0]).caption_span[1] > 0


def test_caption_prior_is_the_same_for_every_video_and_computed_once(tiny, monkeypatch):
    import pnd.scoring.scorer

    model, processor = tiny("llava_onevision")
    calls = []
    original = pnd.scoring.scorer.masked_prefill
    monkeypatch.setattr(pnd.scoring.scorer, "masked_prefill", lambda *a, **k: calls.append(1) or original(*a, **k))
    scorer = pnd.CaptionScorer(model, processor)
    parts = scorer.score(VIDEOS, CAPTIONS, return_parts=True)
    assert torch.equal(parts.prior, parts.prior[:1].expand_as(parts.prior))
    assert not torch.equal(parts.conditional[0], parts.conditional[1])
    scorer.score(VIDEOS[:1], CAPTIONS[:2])  # same captions again: priors reused
    assert len(calls) == 1


def test_caption_priors_are_computed_anew_after_the_weights_change():
    """A scorer kept across weight changes (evaluation between training steps): the priors it kept for a prompt
    layout are not reused once the weights changed in place; its scores equal a new scorer's."""
    from pnd.testing import tiny_model

    model, processor = tiny_model("llava_onevision")
    scorer = pnd.CaptionScorer(model, processor, alpha=0.9)
    before = scorer.score(VIDEOS[:1], CAPTIONS, return_parts=True).prior
    with torch.no_grad():
        model.lm_head.weight.mul_(2.0)
    after = scorer.score(VIDEOS[:1], CAPTIONS, return_parts=True).prior
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, pnd.CaptionScorer(model, processor, alpha=0.9).score(
        VIDEOS[:1], CAPTIONS, return_parts=True).prior)


def test_batched_and_chunked_scores_equal_one_by_one(tiny):
    model, processor = tiny("qwen2_vl")
    batched = pnd.CaptionScorer(model, processor, batch_size=16).score(VIDEOS, CAPTIONS)
    chunked = pnd.CaptionScorer(model, processor, batch_size=2).score(VIDEOS, CAPTIONS)
    single = pnd.CaptionScorer(model, processor, batch_size=1)
    one_by_one = torch.tensor([[single.score([v], [c])[0, 0] for c in CAPTIONS] for v in VIDEOS])
    torch.testing.assert_close(batched, one_by_one, atol=1e-5, rtol=0)
    torch.testing.assert_close(chunked, one_by_one, atol=1e-5, rtol=0)


def test_mean_reduction_divides_by_caption_tokens(tiny):
    model, processor = tiny("llava_onevision")
    total = pnd.CaptionScorer(model, processor, reduction="sum").score(VIDEOS[:1], CAPTIONS)
    mean = pnd.CaptionScorer(model, processor, reduction="mean").score(VIDEOS[:1], CAPTIONS)
    lengths = torch.tensor([len(processor.tokenizer(c, add_special_tokens=False).input_ids) for c in CAPTIONS])
    torch.testing.assert_close(mean, total / lengths)


class ForceAndRecord(LogitsProcessor):
    """After PriorNormalized: record the score of the caption's next token, then force that token."""

    def __init__(self, caption_ids):
        self.caption_ids, self.recorded = caption_ids, []

    def __call__(self, input_ids, scores):
        token = self.caption_ids[len(self.recorded)]
        self.recorded.append(scores[0, token].item())
        forced = torch.full_like(scores, -float("inf"))
        forced[:, token] = 0
        return forced


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_score_is_the_sum_of_prior_normalized_steps(tiny, model_type):
    model, processor = tiny(model_type)
    scorer = pnd.CaptionScorer(model, processor, alpha=0.7, reduction="sum")
    caption = CAPTIONS[0]
    inputs = on_device(scorer.prompt_inputs(VIDEOS[0]))  # on the model's device: pixels in its dtype too
    recorder = ForceAndRecord(scorer.caption_ids(caption))
    pnd.attach(model)
    n = len(recorder.caption_ids)
    model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                   logits_processor=[pnd.PriorNormalized(0.7), recorder])
    expected = torch.tensor(sum(recorder.recorded))
    torch.testing.assert_close(scorer.score([VIDEOS[0]], [caption])[0, 0], expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"alpha": 2}, "alpha must be"), ({"reduction": "max"}, "reduction must be"),
    ({"batch_size": 0}, "batch_size must be"), ({"prior": "blank"}, "prior must be one of 'masked', 'text'"),
])
def test_bad_scorer_arguments(tiny, kwargs, message):
    model, processor = tiny("llava_onevision")
    with pytest.raises(ValueError, match=message):
        pnd.CaptionScorer(model, processor, **kwargs)


def test_packed_captions_equal_one_row_per_caption(tiny):
    """SDPA models score a batch of captions packed into one row over the prefix (its KV held once); with
    pack_captions=False, and on eager models, one row per caption over copies of the prefix's KV. Same scores."""
    from helpers import tiny_model

    model, processor = tiny("llava_onevision")
    packed = pnd.CaptionScorer(model, processor, batch_size=16).score(VIDEOS, CAPTIONS, return_parts=True)
    rows = pnd.CaptionScorer(model, processor, batch_size=16, pack_captions=False).score(VIDEOS, CAPTIONS,
                                                                                       return_parts=True)
    eager, _ = tiny_model("llava_onevision")  # a model of its own: the cached one stays SDPA
    eager.set_attn_implementation("eager")
    eager_rows = pnd.CaptionScorer(eager, processor, batch_size=16).score(VIDEOS, CAPTIONS, return_parts=True)
    for a, b, c in zip(packed, rows, eager_rows):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
        torch.testing.assert_close(a, c, atol=1e-5, rtol=0)
