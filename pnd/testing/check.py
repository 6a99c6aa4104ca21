"""Is pnd exact here? pnd against the brute-force reference on tiny models, on this machine's device and dtype.

For each family, on a tiny random-weight model (`tiny_model`) moved to `device` in `dtype`:
- greedy: pnd's normalized scores for a left-padded batch of two prompts, against the reference's teacher-forced on
  pnd's own tokens (so that one flipped near-tie does not end the comparison);
- beam: each returned beam's `sequences_scores` (num_beams 3, num_return_sequences 2) against the reference's
  normalized scores of that beam's tokens, summed and divided by its length;
- scorer: a `CaptionScorer` score against the reference's normalized scores teacher-forced on the caption.

The largest gap is compared with a tolerance that comes from the dtype's own floor, measured here as in the suite's
bf16 subset (tests/test_bf16.py): plain `generate` against plain from-scratch forwards on its own tokens (each prompt
alone), never below one rounding step of the dtype at the largest |logit|; the tolerance is `K * floor + SLACK`.

Example:
    >>> row = check_family("llava_onevision")
    >>> row.passed, row.gap <= row.tolerance
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers import BatchFeature

from . import (
    VIDEO_ARCHITECTURES,
    on_device,
    random_video,
    tiny_inputs,
    tiny_model,
)
from .reference import forced_scores

DEFAULT_FAMILIES = ("llava_onevision", "qwen2_vl", "qwen3_5", "gemma3", "smolvlm")
PROMPTS = ("Describe the video.", "what colour is the shape? answer with one word.")
CAPTION = "a red circle moves left"
ALPHA, STEPS = 0.5, 4
# The tolerance is K floors (here and in tests/test_bf16.py). pnd's score log p_c - ALPHA * log p_prior comes from two
# passes, each computed in another order than the reference's forward: the conditioned one is plain generate's (the
# measured floor), the prior one another forward of the same model and kernels. One rounding apart per logit moves a
# log_softmax entry by at most two steps (its own logit's and the normalizer's), so the two passes stay within
# 2 * (1 + ALPHA) = 3 floors at ALPHA 0.5; K = 4 leaves a margin (seen in the bf16 subset: at most 0.9 floor).
# SLACK: pnd's fp32 arithmetic, the float32 suite's tolerance.
K, SLACK = 4.0, 1e-4


@dataclass(frozen=True)
class CheckRow:
    """One family's result: the largest gap of each comparison (None: not run), the floor and the tolerance."""

    model_type: str
    greedy: float
    beam: float | None
    scorer: float
    floor: float
    tolerance: float

    @property
    def gap(self) -> float:
        return max(g for g in (self.greedy, self.beam, self.scorer) if g is not None)

    @property
    def passed(self) -> bool:
        return self.gap <= self.tolerance


def largest_gap(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest |got - want| over the entries finite in both (generate sets banned tokens to -inf). A token the
    model forbids (its logit at the dtype's minimum: Chameleon's image tokens) must be forbidden in both (below
    -1e30), whatever its value; otherwise the gap is infinite.

    Example:
        >>> largest_gap(torch.tensor([0.5, -3e38, -math.inf]), torch.tensor([0.25, -2e38, 1.0]))
        0.25
    """
    got, want = got.float(), want.float().to(got.device)
    finite = torch.isfinite(got) & torch.isfinite(want)
    forbidden_got, forbidden_want = finite & (got < -1e30), finite & (want < -1e30)
    if not torch.equal(forbidden_got, forbidden_want):
        return math.inf
    compared = finite & ~forbidden_got
    return float((got[compared] - want[compared]).abs().max()) if compared.any() else 0.0


def rounding_step(logits: torch.Tensor, dtype: torch.dtype) -> float:
    """The spacing of `dtype`'s numbers at the logits' largest |value| (generate returns them in float32, whatever
    the model computes in), forbidden tokens' aside: two roundings of one logit in `dtype` are at most this far apart.

    Example:
        >>> rounding_step(torch.tensor([3.0, -5.0]), torch.bfloat16)
        0.03125
    """
    magnitudes = logits.float().abs()
    largest = float(magnitudes[magnitudes < 1e30].max())  # not a forbidden token's (its logit at the dtype's minimum)
    return torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(largest)) if largest > 0 else 0.0


def _generate(model, inputs, **kwargs):
    torch.manual_seed(0)
    return model.generate(**inputs, max_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True, **kwargs)


def _floor(model, inputs) -> float:
    """The dtype's own noise: plain generate's log-probabilities against plain from-scratch forwards on its tokens.
    Measured on one prompt at a time: on a left-padded row, Kosmos-2's own generate numbers positions otherwise than
    its forward (docs/families.md), which is no rounding noise."""
    plain = _generate(model, inputs, min_new_tokens=STEPS, output_logits=True)
    logits = torch.stack(plain.logits, 1)
    generated = plain.sequences[:, inputs["input_ids"].shape[1]:]
    measured = largest_gap(torch.log_softmax(logits.float(), -1), forced_scores(model, inputs, generated, 0.0))
    return max(measured, rounding_step(logits, model.dtype))


def _greedy_gap(model, inputs, processor_list) -> float:
    out = _generate(model, inputs, min_new_tokens=STEPS, output_scores=True, logits_processor=processor_list)
    generated = out.sequences[:, inputs["input_ids"].shape[1]:]
    return largest_gap(torch.stack(out.scores, 1), forced_scores(model, inputs, generated, ALPHA))


def _beam_gap(model, inputs, processor_list) -> float | None:
    """Beams of one prompt: each returned beam's score against the reference's mean normalized score of its tokens
    (up to and including its end-of-sequence token); None where plain beam search crashes too."""
    beams = {"num_beams": 3, "num_return_sequences": 2, "length_penalty": 1.0}
    try:
        out = _generate(model, inputs, **beams, output_scores=True, logits_processor=processor_list)
    except Exception:
        try:  # transformers' own generate crashes on beams of this family (GLM-4V's videos): nothing to compare
            _generate(model, inputs, **beams)
        except Exception:
            return None
        raise
    eos = model.generation_config.eos_token_id
    eos = torch.tensor(eos if isinstance(eos, list) else [eos], device=out.sequences.device)
    gaps = []
    for row, generated in enumerate(out.sequences[:, inputs["input_ids"].shape[1]:]):
        ends = torch.isin(generated, eos).nonzero()
        length = int(ends[0, 0]) + 1 if len(ends) else len(generated)
        scores = forced_scores(model, inputs, generated[None, :length], ALPHA)[0]
        total = scores.float().gather(1, generated[:length, None]).sum()
        gaps.append(abs(float(out.sequences_scores[row]) - float(total) / length))
    return max(gaps)


def _scorer_gap(model, processor, model_type) -> float:
    """A CaptionScorer score (summed) against the reference's normalized scores teacher-forced on the caption."""
    from ..scoring import CaptionScorer

    video = random_video(0)
    modality = "video" if model_type in VIDEO_ARCHITECTURES else "image"
    visual = video if modality == "video" else video[0]
    scorer = CaptionScorer(model, processor, alpha=ALPHA, reduction="sum", modality=modality)
    score = scorer.score([visual], [CAPTION])[0, 0]
    prompt = scorer.prompt_inputs(visual)  # on the model's device, its pixels in the model's dtype
    caption = torch.tensor(scorer.caption_ids(CAPTION), device=model.device)
    forced = forced_scores(model, prompt, caption[None], ALPHA)[0].float()
    return abs(float(score) - float(forced.gather(1, caption[:, None]).sum()))


def check_family(model_type: str, device: str = "cpu", dtype: torch.dtype = torch.float32) -> CheckRow:
    """pnd's greedy and beam decoding and a CaptionScorer score against the reference, on a tiny `model_type`."""
    import pnd

    model, processor = tiny_model(model_type)
    model = pnd.attach(on_device(model, device, dtype), processor)
    try:
        def inputs(prompts):
            return BatchFeature(dict(tiny_inputs(processor, model_type, prompts))).to(model.device, dtype)

        batch, processor_list = inputs(PROMPTS), [pnd.PriorNormalized(ALPHA)]
        floor = max(_floor(model, inputs((prompt,))) for prompt in PROMPTS)
        greedy = _greedy_gap(model, batch, processor_list)
        beam = _beam_gap(model, inputs(PROMPTS[:1]), processor_list)
        scorer = _scorer_gap(model, processor, model_type)
    finally:
        pnd.detach(model)
    return CheckRow(model_type, greedy, beam, scorer, floor, K * floor + SLACK)


def family_width(model_types) -> int:
    """The width of the family column of `header` and `line` for these model types."""
    return max(len("family"), *(len(t) for t in model_types)) + 2


def header(width: int) -> str:
    return f"{'family':<{width}}result  greedy    beam      scorer    floor     tolerance"


def line(row: CheckRow, width: int) -> str:
    """One family's row under `header`: pass or FAIL, then the gaps ("-": not run), the floor and the tolerance.

    Example:
        >>> row = CheckRow("llava", 1e-6, None, 2e-6, 1e-7, 1.004e-4)
        >>> print(header(9)); print(line(row, 9))
        family   result  greedy    beam      scorer    floor     tolerance
        llava    pass    1.00e-06  -         2.00e-06  1.00e-07  1.00e-04
    """
    values = "  ".join("-       " if x is None else f"{x:.2e}"
                       for x in (row.greedy, row.beam, row.scorer, row.floor, row.tolerance))
    return f"{row.model_type:<{width}}{'pass' if row.passed else 'FAIL':<8}{values}"
