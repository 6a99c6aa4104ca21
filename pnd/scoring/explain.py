"""Why did the answer change? Plain and prior-normalized greedy decoding of one prompt, token by token.

`explain` decodes the prompt twice with the attached model's own `generate` (plainly, then with
`PriorNormalized(alpha)`), then scores both answers token by token with `CaptionScorer`'s teacher forcing:
for each token, `log P(w | v)`, `log P(w)` (the masked prior), the normalized score, how far the prior
pushed the token down or up, and the top alternatives under each (`pnd.scoring.tokens`). `pnd explain` renders it.

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
from ..decoding.logits_processor import PriorNormalized
from .scorer import CaptionScorer
from .tokens import TokenScore


@dataclass
class Explanation:
    """Both greedy decodings of one prompt and what the prior did to each of their tokens.

    `parted_at` is the first step where the two chose different tokens (None when they agree throughout).
    """

    alpha: float
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
            prior: str = "masked", plausibility: float | None = None) -> Explanation:
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

    Returns:
        An `Explanation`; every number equals two plain forwards per step (conditioned; masked prior).
    """
    if not is_attached(model):
        raise ValueError("explain decodes with PriorNormalized: call pnd.attach(model) first.")
    if inputs["input_ids"].shape[0] != 1:
        raise ValueError(f"explain takes one prompt, got a batch of {inputs['input_ids'].shape[0]}: "
                         "call it once per prompt.")
    scorer = CaptionScorer(model, processor, alpha=alpha, prior=prior)
    inputs = scorer.on_device(inputs)
    prompt_length = inputs["input_ids"].shape[1]
    answers = []
    for processors in ([], [PriorNormalized(alpha, prior=prior, plausibility=plausibility)]):
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, logits_processor=processors)
        answers.append(out[0, prompt_length:].tolist())
    plain, normalized = (scorer.prompt_token_scores(inputs, ids, top_k, plausibility) for ids in answers)
    parted = next((k for k, (a, b) in enumerate(zip(*answers)) if a != b), None)
    if parted is None and len(answers[0]) != len(answers[1]):
        parted = min(map(len, answers))
    text = [processor.tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in answers]
    return Explanation(float(alpha), plausibility, plain, normalized, *text, parted)
