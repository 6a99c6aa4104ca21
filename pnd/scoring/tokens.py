"""Per-token view of prior normalization: what the prior did to each token of a text.

For each token `w` (a caption token forced, or a token a decoding chose): `log P(w | v)`, the masked prior
`log P(w)`, the normalized score `log P(w | v) - alpha * log P(w)`, the shift, and the top alternatives
under each of the three. The shift is how normalization moved `w` among its alternatives:
`log_softmax(normalized)[w] - log P(w | v)`, the change of `w`'s log-probability when the normalized scores
are read as a distribution. It is negative when the prior pushed `w` down (a token the prior favours more
than the others), positive when it pushed `w` up. (Every normalized score is at least the conditional
one, since `log P(w) <= 0`: only this relative change says which way the prior pushed.)

Example:
    >>> import torch
    >>> from pnd.scoring.tokens import score_tokens
    >>> conditional = torch.tensor([[0.5, 0.5]]).log()
    >>> prior = torch.tensor([[0.9, 0.1]]).log()
    >>> step = score_tokens(conditional, prior, [0], alpha=1.0, decode=str, top_k=2)[0]
    >>> round(step.shift, 3), step.top["normalized"][0].token_id  # token 0 had the prior: pushed down
    (-1.609, 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

VIEWS = ("conditional", "prior", "normalized")


@dataclass
class Alternative:
    """One of the top tokens at a step under one view: its id, text and value (a log-probability or score)."""

    token_id: int
    text: str
    value: float


@dataclass
class TokenScore:
    """One token of a text and what the prior did to it (see the module docstring)."""

    token_id: int
    text: str
    conditional: float  # log P(w | v)
    prior: float  # log P(w), the visual condition masked out
    normalized: float  # log P(w | v) - alpha * log P(w)
    shift: float  # log_softmax(normalized)[w] - log P(w | v): < 0 pushed down by the prior, > 0 pushed up
    top: dict[str, list[Alternative]]  # VIEWS -> the top_k tokens at this step under each

    def to_dict(self) -> dict:
        """The fields as JSON allows them: a score of -inf (a token the plausibility cut removed) is None (null)."""
        return asdict(self, dict_factory=lambda pairs: {k: None if _not_finite(v) else v for k, v in pairs})


def _not_finite(value) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def score_tokens(conditional: torch.Tensor, prior: torch.Tensor, token_ids: list[int], alpha: float,
                 decode: Callable[[int], str], top_k: int = 5, plausibility: float | None = None,
                 normalized: torch.Tensor | None = None) -> list[TokenScore]:
    """The per-token view of `token_ids` from the log-probabilities at each of their steps.

    Args:
        conditional: (steps, vocab) `log P(. | v)` at each step (`log_softmax` of the conditioned logits).
        prior: (steps, vocab) `log P(.)` at each step, the same under the masked prior.
        token_ids: the token at each step.
        alpha: the prior weight of the normalized score.
        decode: token id -> its text (e.g. `lambda i: tokenizer.decode([i])`).
        top_k: alternatives listed per step and view.
        plausibility: as for `PriorNormalized`: tokens below `plausibility` times the most likely token's
            conditioned probability get a normalized score of -inf (they cannot be chosen); none at alpha 0.
        normalized: (steps, vocab) another method's scores at each step (VCD, ICD, M3ID: what its logits processor
            returned), in place of `conditional - alpha * prior` with `plausibility`; `prior` is then its contrast.

    Returns:
        One `TokenScore` per token.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}.")
    conditional, prior = conditional.float(), prior.float()
    if normalized is not None:
        normalized = normalized.float()
    else:
        normalized = conditional - alpha * prior
        if plausibility is not None and alpha > 0:  # alpha 0: plain decoding, no cut (as PriorNormalized's)
            cutoff = conditional.amax(-1, keepdim=True) + math.log(plausibility)
            normalized = normalized.masked_fill(conditional < cutoff, -math.inf)
    shift = torch.log_softmax(normalized, -1) - conditional
    views = dict(zip(VIEWS, (conditional, prior, normalized)))
    k = min(top_k, conditional.shape[-1])
    top = {name: view.topk(k, -1) for name, view in views.items()}
    rows = []
    for step, token in enumerate(token_ids):
        rows.append(TokenScore(
            token, decode(token), *(float(v[step, token]) for v in (conditional, prior, normalized, shift)),
            {name: [Alternative(int(i), decode(int(i)), float(v)) for v, i in zip(t.values[step], t.indices[step])]
             for name, t in top.items()}))
    return rows
