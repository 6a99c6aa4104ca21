"""Prefix-LM families: the prompt (image and text) attends to itself both ways, generated tokens causally.

PaliGemma (`paligemma`): the processor replaces each `<image>` the template wrote with `<image>` x image_seq_length,
writes the BOS token after the last image and a newline at the end, and returns `token_type_ids`: 0 on the prompt
(the prefix), 1 on a suffix (`suffix=`, for training). PaliGemma's forward turns every 0 into one bidirectional block
on the first call (`block_sequence_ids`); later calls (decoding steps on the cache) are causal. A prompt without
`token_type_ids` is causal throughout. The expansion is what the processor reports replacing (the `<image>` tokens;
BOS and the newline are text the prior keeps).

What that asks of the prior (docs/design.md §1): every kept token sees every kept token of the prefix, before and
after it, as in a forward of the prompt with the image masked out; so the prior's prefill is a call of its own with an
explicit mask (`pnd.decoding.prior.prefill_masks`), and nothing is reused from the conditioned pass (the text before
the image saw the image there: `reuses_text=False`). Left padding: transformers' own generate gives a left-padded row
the same tokens as the prompt alone (its block mask keeps the padding out, its positions are the mask's cumsum), and
so does the prior. PaliGemma 2 (a Gemma 2 language model) has sliding-window layers: its prefix stays bidirectional
beyond the window (transformers or-s the block overlay after the window), and so does the prior's. Images only (no
video processor). The processor also returns `labels` (-100 on the prefix), which
pnd's scorer drops (`generate` does not forward them). Continuing a conversation from a returned cache is refused: the
cache holds the first prompt's bidirectional prefix, which the prior over the whole conversation cannot tell apart.

Gemma 3n (`gemma3n`, registered here too; not a prefix LM: its prompt is causal): the processor replaces the
template's `<image_soft_token>` with `\n\n<start_of_image>` + `<image_soft_token>` x image_seq_length +
`<end_of_image>\n\n`, Gemma 3's layout; the prior hides what it reports replacing. Its language model computes
per-layer inputs from each token's id and embedding (`get_per_layer_inputs`, `project_per_layer_inputs`): per token,
so the prior's own call on the kept ids gives the kept tokens the per-layer inputs they have in the conditioned pass
(image and audio ids map to per-layer id 0 there, and are hidden). AltUp and LAuReL are per token too. Its last
layers share the keys and values of the last unshared layer of their type (`num_kv_shared_layers`), taken from the
same call's cache: the prior rows' cache holds the prior's, so the shared layers see the kept tokens only. Sliding and
full attention layers, as Gemma 3. Images (the vision tower is a timm model, MobileNet-V5; no video processor) and
audio: the processor reports its `\n\n<start_of_audio>…<end_of_audio>\n\n` block too, so the prior hides it with the
image (`prior_logits`); `generate` refuses audio inputs (`input_features`) at alpha > 0, as for every family, and is
plain generate at alpha = 0 (tests/test_gemma3n.py).

Example:
    >>> import torch
    >>> PALIGEMMA.bidirectional_prefix({"token_type_ids": torch.tensor([[0, 0, 0, 1]])}, torch.tensor([[0, 1, 1, 1]]))
    tensor([[False,  True,  True, False]])
    >>> PALIGEMMA.bidirectional_prefix({}, torch.tensor([[1, 1]]))  # no token types: a causal prompt
    tensor([[False, False]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .registry import Architecture, register


@dataclass(frozen=True)
class PrefixLMArchitecture(Architecture):
    """A family whose `prefix_key` input is 0 on the bidirectional prefix of the prompt."""

    prefix_key: str = "token_type_ids"

    def bidirectional_prefix(self, inputs: dict | None, attention_mask: torch.Tensor) -> torch.Tensor:
        """The attended slots whose `prefix_key` is 0; with `inputs` None (a prompt as the processor builds it for
        generation), every attended slot; with inputs that lack the key, none (the family's forward is causal)."""
        attended = attention_mask.bool()
        if inputs is None:
            return attended
        types = inputs.get(self.prefix_key)
        return attended & (types == 0) if types is not None else torch.zeros_like(attended)

    def appended_types(self) -> dict[str, int]:
        """A caption after the prompt is the causal suffix: `prefix_key` 1."""
        return {**super().appended_types(), self.prefix_key: 1}


PALIGEMMA = register(
    PrefixLMArchitecture(
        name="PaliGemma",
        model_types=("paligemma",),
        pixel_keys=("pixel_values",),
        causal_prompt=False,  # the packed prefill's causal split would drop the bidirectional prefix
        reuses_text=False,  # the text before the image attends to the image in the conditioned pass
        reported=True,
    )
)
GEMMA3N = register(
    Architecture(
        name="Gemma 3n",
        model_types=("gemma3n",),
        pixel_keys=("pixel_values",),
        token_inputs=("token_type_ids",),  # 1 on image tokens (not read by its forward): text 0
        reported=True,
    )
)
