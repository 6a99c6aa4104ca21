"""Brute-force reference for prior-normalized decoding, independent of pnd's decoding code.

Every step recomputes two full forwards from scratch, without any cache (docs/design.md §3.2):
  conditioned: the model on the whole sequence, pixels included, HF position ids;
  prior:       the same call with the attention mask set to 0 over the whole visual expansion (every token the
               processor inserted for an image or video) and the position ids of the conditioned pass passed
               explicitly; for a model with recurrent layers (Qwen3.5), where masking is not removal, a call on
               the kept tokens alone (the expansion cut out, each row left-padded), at those same position ids.

The methods that intervene inside the language model (PAI, ONLY, VISTA) apply their intervention by hand in those
from-scratch forwards (`interventions.py`: transformers' eager attention edited at its softmax on a copy of the
model, forward hooks).

The expansion is read with plain loops over the tokens (`expansion.py`); `processor_expansion` reads it from the
processor's own record of its replacements: pnd's tests check the two (and pnd's adapters) agree. The suite and
`pnd check` compare pnd with it; it imports nothing of `pnd.decoding` or `pnd.scoring`.

Example:
    >>> from pnd.testing import tiny_inputs, tiny_model
    >>> from pnd.testing.reference import greedy
    >>> model, processor = tiny_model("llava_onevision")
    >>> tokens, scores = greedy(model, tiny_inputs(processor, "llava_onevision"), alpha=0.5, steps=2)
    >>> tokens.shape
    torch.Size([1, 2])
"""

from .expansion import placeholder_positions, processor_expansion, text_in_replacement, visual_positions
from .forwards import (
    PIXEL_KEYS,
    SUFFIX_TYPE,
    TOKEN_TYPES,
    conditioned_positions,
    full_logits,
    is_hybrid,
    kept_tokens_forward,
    placeholders_only_removed,
    sequence_mask,
    window_masks,
)
from .interventions import (
    decoder_layers,
    eager_attention,
    eager_copy,
    only_combine,
    only_contrast,
    pai_combine,
    pai_conditioned,
    steering_vectors,
    vista_conditioned,
)
from .scores import (
    contrast_prior,
    forced_scores,
    greedy,
    masked_prior,
    method_forced,
    method_greedy,
    method_scores,
    normalized_scores,
    text_only_tokens,
    text_prior,
)

__all__ = ["PIXEL_KEYS", "SUFFIX_TYPE", "TOKEN_TYPES", "conditioned_positions", "contrast_prior", "decoder_layers",
           "eager_attention", "eager_copy", "forced_scores", "full_logits", "greedy", "is_hybrid", "kept_tokens_forward",
           "masked_prior", "method_forced", "method_greedy", "method_scores", "normalized_scores", "only_combine",
           "only_contrast", "pai_combine", "pai_conditioned", "placeholder_positions", "placeholders_only_removed",
           "processor_expansion", "sequence_mask", "steering_vectors", "text_in_replacement", "text_only_tokens",
           "text_prior", "visual_positions", "vista_conditioned", "window_masks"]
