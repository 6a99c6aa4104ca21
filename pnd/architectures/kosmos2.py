"""Kosmos-2 and Kosmos-2.5: a vision tower whose features, through latent queries, overwrite the embeddings of the
prompt's latent-query slots. Kosmos-2's `generate` runs its text model's `generate`; Kosmos-2.5's is the model's own.

How transformers 5.23 builds its prompts: the processor prefixes every text with `<image>`, one ordinary vocabulary id
per latent query (the ids after `<unk>`, consecutive) and `</image>`, right after `<s>`, outside
`get_text_with_replacements` (nothing reported), and marks the latent-query slots in `image_embeds_position_mask`. The
config names none of those ids, so the rule is the structure the processor writes: after each row's `<s>`, a token,
`latent_query_num` consecutive ids, a token: those `latent_query_num + 2` tokens are the expansion.

Positions: Kosmos-2's text model numbers positions from its first non-pad token, offset by the padding id, and its
`generate` hands the forward no position ids. pnd's paired calls (`pnd.decoding.steps`) take `position_ids` from
`Kosmos2Architecture.step_positions`: the attended tokens counted, from the padding id on. On an unpadded prompt that is
transformers' own numbering; on a left-padded one transformers counts the padding slots in its decoding steps (not in
the prompt), so its padded rows decode otherwise than alone (tests/test_kosmos2.py): pnd's paired rows number a padded
prompt as the same prompt alone. `prior="text"` renumbers the kept tokens from the padding id + 1 (`first_position`),
as Kosmos-2 numbers a prompt by itself.

Repaired by `prepare` (transformers 5.23): the model's forward requires pixel values or image embeddings, so it runs as
the text model without them (`CaptionScorer` continuing a prompt's cache), and takes strided position ids (its position
embedding `view`s them); its text decoder takes 2-D attention masks only, so it is given 4-D ones as other decoders are
(`pnd._compat.repairs.accept_4d_masks`: `CaptionScorer` packs captions with one). Worked around in the tiny model
(`pnd/testing/builders/kosmos-2.py`): the processor's `__init__` takes `*kwargs` (a typo for `**kwargs`), so a
`chat_template` keyword fails (set afterwards); it needs a tokenizer with `<s>` and `<unk>`.

Kosmos-2.5 (a Pix2Struct-style tower on flattened patches, Kosmos-2's text decoder): its processor writes `<s>`,
`<image>`, `<s>` per latent query and `</image>` before the text, the same structure with `<s>` as every latent-query
id; its `prepare_inputs_for_generation` drops the position ids, so pnd numbers its paired calls as Kosmos-2's. Repaired
by `prepare`: the processor writes one `image_embeds_position_mask` for the whole batch, as if no row were padded, so
pnd's paired calls give the forward each row's own (a left-padded row would get the image on its padding; plain
`generate`, and alpha = 0, keep transformers' behaviour, as for Kosmos-2's positions); and strided position ids.
The blank and noise priors keep its patches' row and column (`Architecture.patch_coordinates`).

Example:
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("kosmos-2")
    >>> ids = tiny_inputs(processor, "kosmos-2", image=True)["input_ids"]
    >>> int(KOSMOS2.expansion_mask(model.config, ids).sum()) == model.config.latent_query_num + 2
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._compat.repairs import accept_4d_masks
from .registry import Architecture, register, unwrap, wrap


@dataclass(frozen=True)
class Kosmos2Architecture(Architecture):
    hides: str = "`<image>`, the latent-query slots and `</image>` that the processor writes after `<s>`"
    embeds_prompt: bool = True  # its generate runs its text model's generate
    generates_with: str = "text_model"  # the submodule whose generate and forward the family's generate runs
    # transformers 5.23's own Kosmos-2 generate fails with a static cache (its 2-D mask spans the prompt and the
    # generated tokens, not the cache's slots, which its attention then gets as keys)
    static_cache: bool = False

    def language_model(self, model):
        return model.text_model.model

    def placeholder_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """The latent-query slots: `latent_query_num` query ids (`latent_query_ids`) two tokens after each row's first
        `<s>`."""
        text = config.text_config
        queries = config.latent_query_num
        mask = torch.zeros_like(input_ids, dtype=torch.bool)
        for row, ids in enumerate(input_ids.tolist()):
            start = next((i for i, t in enumerate(ids) if t != text.pad_token_id), len(ids))
            slots = ids[start + 2:start + 2 + queries]
            if (start + queries + 2 < len(ids) and ids[start] == text.bos_token_id
                    and slots == self.latent_query_ids(config, slots[0])):
                mask[row, start + 2:start + 2 + queries] = True
        return mask

    def latent_query_ids(self, config, first: int) -> list[int]:
        """The ids the processor writes for the latent queries, the first being `first`: consecutive ids."""
        return list(range(first, first + config.latent_query_num))

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """The latent-query slots with the `<image>` before and the `</image>` after them."""
        slots = self.placeholder_mask(config, input_ids)
        ends = torch.nn.functional.pad(slots[:, 1:], (0, 1)) | torch.nn.functional.pad(slots[:, :-1], (1, 0))
        return slots | ends

    def position_ids(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor, **inputs) -> torch.Tensor:
        return self.step_positions(model, attention_mask, input_ids.shape[1])

    def first_position(self, model) -> int:
        """The position of a prompt's first token (its padding id + 1): where `prior="text"` renumbers from."""
        return model.config.text_config.pad_token_id + 1

    def step_positions(self, model, attention_mask: torch.Tensor, length: int) -> torch.Tensor:
        """The position ids of the last `length` tokens: the attended tokens counted from the padding id on (padding
        at the padding id), as Kosmos-2's text model numbers a prompt.

        Example: padding id 1, mask [0, 1, 1] -> positions [1, 2, 3]."""
        pad = model.config.text_config.pad_token_id
        mask = attention_mask.long()
        return (mask.cumsum(-1) * mask + pad)[:, -length:]

    def prepare(self, model) -> None:
        wrap(model, "forward", _text_forward, model)
        accept_4d_masks(model.text_model.model)

    def unprepare(self, model) -> None:
        unwrap(model, "forward")
        accept_4d_masks(model.text_model.model, undo=True)


def _text_forward(model, forward, *args, **kwargs):
    """`forward` that also runs without pixels or image embeddings, as the text model, and takes expanded (strided)
    position ids (its position embedding `view`s them; `CaptionScorer` expands one row's over its captions)."""
    _contiguous_positions(kwargs)
    if args or kwargs.get("pixel_values") is not None or kwargs.get("image_embeds") is not None:
        return forward(*args, **kwargs)
    return model.text_model(**{k: v for k, v in kwargs.items() if k != "pixel_values"})


def _contiguous_positions(kwargs: dict) -> None:
    """Make the position ids contiguous: the sinusoidal position embedding `view`s them (`CaptionScorer` expands one
    row's over its captions)."""
    if kwargs.get("position_ids") is not None:
        kwargs["position_ids"] = kwargs["position_ids"].contiguous()


KOSMOS2 = register(Kosmos2Architecture(name="Kosmos-2", model_types=("kosmos-2",), pixel_keys=("pixel_values",),
                                       token_inputs=("image_embeds_position_mask",)))


@dataclass(frozen=True)
class Kosmos2_5Architecture(Kosmos2Architecture):
    """Kosmos-2.5: Kosmos-2's text decoder and prompt structure, `<s>` for every latent query, and the model's own
    `generate` (see the module's docstring)."""

    hides: str = "`<image>`, the latent-query `<s>` slots and `</image>` that the processor writes after `<s>`"
    embeds_prompt: bool = False
    static_cache: bool = True

    def latent_query_ids(self, config, first: int) -> list[int]:
        """The latent queries' ids: `<s>` (the text config's `bos_token_id`) each."""
        return [config.text_config.bos_token_id] * config.latent_query_num

    def prepare(self, model) -> None:
        wrap(model, "forward", _realigned_forward, self, model)

    def unprepare(self, model) -> None:
        unwrap(model, "forward")


def _realigned_forward(architecture: Kosmos2_5Architecture, model, forward, *args, **kwargs):
    """`forward` whose `image_embeds_position_mask` marks each row's own latent-query slots (1) and tags (-1), taking
    strided position ids.

    transformers 5.23's Kosmos-2.5 processor writes one mask for every row, as if none were padded, so a left-padded
    row would get the image features on its padding and its first text tokens. In pnd's paired calls (alpha > 0; plain
    `generate`, and so alpha = 0, keeps transformers' behaviour), where the given mask differs from the prompt's
    structure, the structure's is used; an unpadded prompt's mask is left as it is.
    """
    _contiguous_positions(kwargs)
    given, ids = kwargs.get("image_embeds_position_mask"), kwargs.get("input_ids")
    paired = hasattr(kwargs.get("past_key_values"), "is_paired")  # pnd's caches: a call of a paired generate
    if paired and given is not None and ids is not None and given.shape == ids.shape:
        slots = architecture.placeholder_mask(model.config, ids)
        if slots.any(-1).all():
            tags = architecture.expansion_mask(model.config, ids) & ~slots
            wanted = slots.long() - tags.long()
            if not torch.equal(given.long(), wanted):
                kwargs["image_embeds_position_mask"] = wanted.to(given.dtype)
    return forward(*args, **kwargs)


KOSMOS2_5 = register(Kosmos2_5Architecture(name="Kosmos-2.5", model_types=("kosmos-2.5",),
                                           pixel_keys=("flattened_patches",), token_inputs=("image_embeds_position_mask",),
                                           patch_coordinates=2))
