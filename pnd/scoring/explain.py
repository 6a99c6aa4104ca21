"""Why did the answer change? Plain and prior-normalized greedy decoding of one prompt, token by token.

`explain` decodes the prompt twice with the attached model's own `generate` (plainly, then with
`PriorNormalized(alpha)`), then scores both answers token by token with `CaptionScorer`'s teacher forcing:
for each token, `log P(w | v)`, `log P(w)` (the masked prior), the normalized score, how far the prior
pushed the token down or up, and the top alternatives under each (`pnd.scoring.tokens`). `pnd explain` renders it.
With `method` (another paired logits processor: VCD, ICD, M3ID, PAI, ONLY, VISTA, docs/methods.md) the second
decoding is that method's, and both answers are forced through `generate` with it: each token's "prior" is the
method's contrast (`log p_d`: noised pixels, the disturbed instruction, the prompt without the image, ONLY's heads
switched off) and its normalized score the method's own. VISTA has no contrast at decoding: its tokens show the
unsteered model's `log P(w | v)`, the prompt without the image as "prior", and the steered model's log-probabilities
as the normalized score, so the shift is what the steering did.

Example:
    >>> import pnd
    >>> from pnd.scoring.explain import explain
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> result = explain(pnd.attach(model), processor, tiny_inputs(processor, "llava_onevision"), alpha=1.0,
    ...                  max_new_tokens=4)
    >>> first = result.plain[0]  # the plain decoding chose the most likely token under log P(w | v)
    >>> first.token_id == first.top["conditional"][0].token_id
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..attachment import is_attached
from ..decoding.captioning import GREEDY
from ..decoding.logits_processor import PairedProcessor, PriorNormalized
from .forced import forced_steps
from .scorer import CaptionScorer
from .tokens import TokenScore, score_tokens


@dataclass
class Explanation:
    """Both greedy decodings of one prompt and what the prior did to each of their tokens.

    `parted_at` is the first step where the two chose different tokens (None when they agree throughout).
    """

    alpha: float | None
    plausibility: float | None
    plain: list[TokenScore]
    normalized: list[TokenScore]
    plain_text: str
    normalized_text: str
    parted_at: int | None

    def to_dict(self) -> dict:
        return {**vars(self), "plain": [t.to_dict() for t in self.plain],
                "normalized": [t.to_dict() for t in self.normalized]}


@torch.no_grad()
def explain(model, processor, inputs: dict, alpha: float = 0.5, *, max_new_tokens: int = 32, top_k: int = 5,
            prior: str = "masked", plausibility: float | None = None, method: PairedProcessor | None = None,
            prior_inputs: dict | None = None) -> Explanation:
    """Decode one prompt plainly and prior-normalized (greedy) and score every token of both answers.

    Args:
        model: an attached model (`pnd.attach(model)`).
        processor: its processor.
        inputs: the processor's outputs for one prompt with its video(s) or image(s).
        alpha: the prior weight of the normalized decoding, in [0, 1].
        max_new_tokens: the longest answer, in tokens.
        top_k: alternatives listed per token under each view.
        prior: "masked" (default) or "text", as for `PriorNormalized`.
        plausibility: as for `PriorNormalized`, for the normalized decoding.
        method: another paired logits processor for the second decoding (e.g. `method("vcd").processor()` of
            `pnd.decoding.methods`, or `pnd.M3ID()`); `alpha`, `prior` and `plausibility` are then its own.
        prior_inputs: the contrast prompt's processor outputs, for a method with `prior="inputs"` (ICD).

    Returns:
        An `Explanation`; every number equals two plain forwards per step (conditioned; the prior or contrast).
    """
    if not is_attached(model):
        raise ValueError("explain decodes with PriorNormalized: call pnd.attach(model) first.")
    if inputs["input_ids"].shape[0] != 1:
        raise ValueError(f"explain takes one prompt, got a batch of {inputs['input_ids'].shape[0]}: "
                         "call it once per prompt.")
    scorer = CaptionScorer(model, processor, alpha=alpha if method is None else 0.0,
                           prior=prior if method is None else "masked")
    inputs = scorer.on_device(inputs)
    extra = {} if prior_inputs is None else {"prior_inputs": scorer.on_device(prior_inputs)}
    normalizer = method or PriorNormalized(alpha, prior=prior, plausibility=plausibility)
    prompt_length = inputs["input_ids"].shape[1]
    answers = []
    for processors in ([], [normalizer]):
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, **GREEDY, logits_processor=processors,
                             **(extra if processors else {}))
        answers.append(out[0, prompt_length:].tolist())
    if method is None:
        plain, normalized = (scorer.prompt_token_scores(inputs, ids, top_k, plausibility) for ids in answers)
    else:
        plain, normalized = (_method_token_scores(model, processor, inputs, method, ids, top_k, extra)
                             for ids in answers)
        alpha, plausibility = getattr(method, "alpha", None), getattr(method, "plausibility", None)
    parted = next((k for k, (a, b) in enumerate(zip(*answers)) if a != b), None)
    if parted is None and len(answers[0]) != len(answers[1]):
        parted = min(map(len, answers))
    text = [processor.tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in answers]
    return Explanation(None if alpha is None else float(alpha), plausibility, plain, normalized, *text, parted)


def _method_token_scores(model, processor, inputs: dict, method: PairedProcessor, token_ids: list[int], top_k: int,
                         extra: dict) -> list[TokenScore]:
    """The per-token view of `token_ids` under `method`: its "prior" the method's contrast, its "normalized" the
    method's scores. A method with no contrast at decoding (VISTA) is shown against the unsteered model (its
    "conditional") and the prompt without its visual input that its steering vectors subtract (its "prior")."""
    if not token_ids:
        return []
    conditional, contrast, scores = forced_steps(model, inputs, method, token_ids, **extra)
    if contrast is None:  # a steered model (VISTA): against the model as it is, and the prompt without its video
        conditional, contrast = CaptionScorer(model, processor, alpha=0.0, prior=method.prior).prompt_token_logprobs(
            inputs, token_ids)
    return score_tokens(conditional, contrast, token_ids, 0.0, lambda i: processor.tokenizer.decode([i]), top_k,
                        normalized=scores)
