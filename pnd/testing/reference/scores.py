"""The brute-force reference's scores and decoding: normalized scores, greedy decoding and teacher forcing from
`full_logits`, and the other methods' combinations of a conditioned and a prior pass (docs/methods.md).
"""

import torch

from .expansion import visual_positions
from .forwards import conditioned_positions, full_logits, kept_tokens_logits, sequence_mask


def normalized_scores(model, inputs, sequence, alpha, prior=None):
    """s = log_softmax(cond) - alpha * log_softmax(prior) for the next token after `sequence`.

    `prior(model, inputs, sequence)` replaces the reference prior's logits (tests that show a wrong prior changes
    the tokens)."""
    cond = torch.log_softmax(full_logits(model, inputs, sequence, prior=False), -1)
    if alpha == 0:
        return cond
    prior_logits = full_logits(model, inputs, sequence, prior=True) if prior is None else prior(model, inputs, sequence)
    return cond - alpha * torch.log_softmax(prior_logits, -1)


def greedy(model, inputs, alpha, steps, banned=(), prior=None):
    """Normalized greedy decoding by brute force: (generated tokens, per-step scores). Tokens in `banned` are never
    chosen (as generate's `min_new_tokens` bans the end-of-sequence token); `prior` as for `normalized_scores`."""
    sequence = inputs["input_ids"]
    scores = []
    for _ in range(steps):
        s = normalized_scores(model, inputs, sequence, alpha, prior)
        scores.append(s)
        choice = s.clone()
        choice[:, list(banned)] = -torch.inf
        sequence = torch.cat([sequence, choice.argmax(-1, keepdim=True)], dim=1)
    return sequence[:, inputs["input_ids"].shape[1] :], scores


def forced_scores(model, inputs, generated, alpha):
    """Per-step normalized scores (batch, steps, vocab) along given generated tokens."""
    prompt = inputs["input_ids"]
    steps = []
    for k in range(generated.shape[1]):
        steps.append(normalized_scores(model, inputs, torch.cat([prompt, generated[:, :k]], 1), alpha))
    return torch.stack(steps, 1)


# --- other decoding methods (docs/methods.md): a combination of the conditioned and a prior's log-probabilities ---


def contrast_prior(contrast):
    """The prior of a contrast input (VCD, ICD, prior="inputs"): one from-scratch forward of the contrast prompt (its
    own pixels, positions and mask) followed by the generated tokens, as a plain call of the model."""
    def prior(model, inputs, sequence):
        generated = sequence[:, inputs["input_ids"].shape[1] :]
        return full_logits(model, contrast, torch.cat([contrast["input_ids"], generated], 1), prior=False)
    return prior


def text_prior(model, inputs, sequence):
    """M3ID's unconditioned model: the sequence with the visual expansion cut out, the kept tokens alone at positions
    0, 1, 2, ... (the prompt as if it had no visual input)."""
    return kept_tokens_logits(model, sequence, *text_only_tokens(model, inputs, sequence), inputs["input_ids"].shape[1])


def text_only_tokens(model, inputs, sequence):
    """(kept, positions) of `text_prior`'s forward: every non-padding token but the visual expansion, at 0, 1, 2, ...
    (M-RoPE: the same on its three rows)."""
    mask = sequence_mask(inputs, sequence).bool()
    visual = visual_positions(model, inputs["input_ids"])
    mask[:, : visual.shape[1]] &= ~visual
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    if conditioned_positions(model, sequence, sequence_mask(inputs, sequence), inputs).ndim == 3:  # M-RoPE: text
        positions = positions.expand(3, -1, -1)
    return mask, positions


def masked_prior(model, inputs, sequence):
    """pnd's prior (docs/design.md §1) by brute force."""
    return full_logits(model, inputs, sequence, prior=True)


def method_scores(model, inputs, sequence, combine, prior, step, conditioned=None, banned=()):
    """`combine(log p_c, log p_prior, step)` for the next token after `sequence` (step 1: the first generated one).

    `conditioned(model, inputs, sequence)` replaces the conditioned logits (`full_logits(..., prior=False)`): the
    methods that intervene inside the model (`interventions.py`); `prior=None`: no prior forward, combine gets None.
    `banned`: tokens that an earlier logits processor sets to -inf (`min_new_tokens`' end of sequence); log p_c holds
    them at -inf, not renormalized, as the scores that reach a method do."""
    conditioned = conditioned or (lambda *args: full_logits(*args, prior=False))
    cond = torch.log_softmax(conditioned(model, inputs, sequence).float(), -1)
    cond[:, list(banned)] = -torch.inf
    return combine(cond, None if prior is None else torch.log_softmax(prior(model, inputs, sequence).float(), -1), step)


def method_greedy(model, inputs, steps, combine, prior, banned=(), conditioned=None):
    """Greedy decoding by brute force on `method_scores`: (generated tokens, per-step scores)."""
    sequence, scores = inputs["input_ids"], []
    for step in range(1, steps + 1):
        s = method_scores(model, inputs, sequence, combine, prior, step, conditioned)
        scores.append(s)
        choice = s.clone()
        choice[:, list(banned)] = -torch.inf
        sequence = torch.cat([sequence, choice.argmax(-1, keepdim=True)], dim=1)
    return sequence[:, inputs["input_ids"].shape[1] :], scores


def method_forced(model, inputs, generated, combine, prior, conditioned=None, banned=()):
    """Per-step `method_scores` (batch, steps, vocab) along given generated tokens."""
    prompt = inputs["input_ids"]
    return torch.stack([method_scores(model, inputs, torch.cat([prompt, generated[:, :k]], 1), combine, prior, k + 1,
                                      conditioned, banned) for k in range(generated.shape[1])], 1)
