"""Given tokens forced through an attached model's `generate` with any paired logits processor (CPN, VCD, ICD, M3ID,
PAI, ONLY, VISTA): at each step, what the method combined (log p_c and its prior or contrast log p_d) and what it
returned.

`pnd explain --method` shows these per token; lmms-eval's loglikelihood under a method other than cpn scores a
continuation with them.

Example:
    >>> import pnd
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> steps = forced_steps(pnd.attach(model), tiny_inputs(processor, "llava_onevision"), pnd.M3ID(), [5, 9])
    >>> [view.shape[0] for view in steps]  # (steps, vocabulary) each: log p_c, log p_d, M3ID's scores
    [2, 2, 2]
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from ..decoding.generation import traced_steps
from ..decoding.logits_processor import PairedProcessor

# generate's own logits processors off, whatever the checkpoint's generation_config sets (a repetition_penalty
# would change log p_c): the steps are the method's alone
_PLAIN = {"num_beams": 1, "num_return_sequences": 1, "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
          "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "sequence_bias": None, "suppress_tokens": None,
          "begin_suppress_tokens": None, "min_length": 0, "min_new_tokens": None, "forced_bos_token_id": None,
          "forced_eos_token_id": None, "exponential_decay_length_penalty": None, "guidance_scale": None,
          "renormalize_logits": False, "remove_invalid_values": False, "watermarking_config": None}


class _Forced(LogitsProcessor):
    """Keeps the scores each step hands it (what the processors before it returned), then forces `token_ids`."""

    def __init__(self, token_ids: list[int]):
        self.token_ids, self.seen = token_ids, []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.seen.append(scores[0].float())
        forced = torch.full_like(scores, -torch.inf)
        forced[:, self.token_ids[len(self.seen) - 1]] = 0
        return forced


@torch.no_grad()
def forced_steps(model, inputs: dict, method: PairedProcessor, token_ids: list[int],
                 **generate_kwargs) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(log p_c, log p_d, the method's scores), each (len(token_ids), vocabulary) in fp32, at each step of `token_ids`
    forced after the one prompt of `inputs` (an attached model; `generate_kwargs`: e.g. `prior_inputs` for ICD),
    without the logits processors of the model's `generation_config` (a repetition penalty would change log p_c).
    log p_d is None for a method with no second distribution at decoding (VISTA: log p_c is the steered model's).

    Raises:
        ValueError: for a prompt batch, no tokens, or tokens that end the generation early (an end-of-sequence token
            before the last).
    """
    if inputs["input_ids"].shape[0] != 1 or not token_ids:
        raise ValueError("forced_steps takes one prompt and at least one token.")
    forced = _Forced(token_ids)
    with traced_steps() as steps:
        model.generate(**inputs, max_new_tokens=len(token_ids), do_sample=False, logits_processor=[method, forced],
                       **{**_PLAIN, **generate_kwargs})
    if len(steps) != len(token_ids):
        raise ValueError(f"generation stopped after {len(steps)} of the {len(token_ids)} forced tokens: an "
                         "end-of-sequence token can only be the last.")
    conditional = torch.stack([cond[0] for cond, _ in steps])
    contrast = None if steps[0][1] is None else torch.stack([prior[0] for _, prior in steps])
    return conditional, contrast, torch.stack(forced.seen)
