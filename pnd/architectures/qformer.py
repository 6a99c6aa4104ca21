"""The Q-Former families: BLIP-2, InstructBLIP (images) and InstructBLIP-Video, whose `generate` runs their language
model's `generate` on `inputs_embeds`.

How transformers 5.23 builds their prompts: the processor writes no placeholder into the text (nothing it could
report replacing): it tokenizes the text, then prepends `num_query_tokens` placeholder tokens per frame (the config's
`image_token_index`, or `video_token_index` for 4 frames: `processing_instructblipvideo.py` writes
`video_token * num_query_tokens * 4`) in front of each row, before the BOS and before the tokenizer's left padding.
The model's forward and `generate` scatter the Q-Former's projected query outputs into those placeholders' embeddings
(`masked_scatter`), so the prompt holds a visual span of tokens at its start: the expansion is that leading run of
placeholders (`QFormerArchitecture.expansion_mask`), and the prior hides it as for any family; the Q-Former's own
input (`qformer_input_ids`, the instruction) reaches the language model only through those queries.

Their `generate` computes the embeddings and calls `language_model.generate(inputs_embeds=..., input_ids=...)`, whose
forwards bypass the attached model's forward: `attach` wraps the language model's forward too (`embeds_prompt`,
`pnd.decoding.steps.language_model_forward`), so that its calls within a paired generate call are paired ones; the
prior's prefill reads the prompt's token ids from the generate call. Their forward hands every keyword to the vision
tower and Q-Former too, whose embeddings fail on the language model's `position_ids` (`CaptionScorer` passes them):
`prepare` repairs the model's `get_image_features` / `get_video_features` to drop the language model's keywords, and
its `forward` to run as the language model when given no pixels (as `CaptionScorer` continues a prompt's cache).
The priors that run the vision tower (prior="blank", "inputs", "noise") and continuing a conversation from
`past_key_values` are refused on them (`pnd.decoding.steps._prefill`).

Checkpoints whose language model is an encoder-decoder (Flan-T5) are refused at `attach` (`prepare`): the image's
queries enter the encoder, and the decoder that generates cross-attends to them. InstructBLIP's processor pads the
Q-Former's instruction on the side its language tokenizer pads (left), so in a left-padded batch the Q-Former (absolute
positions) gives a prompt slightly different queries than alone: transformers' own behaviour, which pnd keeps (the
tests' references take each row's instruction as the batch padded it). pnd's commands and lmms-eval models build
prompts with the processor's chat template, which these processors drop when loaded (their `__init__` ignores it), so
they cannot serve these families from a checkpoint folder: in Python, set `processor.chat_template` or write the prompt
text yourself. InstructBLIP-Video takes 4-frame videos only (its processor prepends 4 frames' placeholders whatever it
gets; an image crashes in transformers' own `generate`), passed as `images=`.

Worked around in the tiny models (`pnd/testing/builders/`): the processors' `__init__` drops a `chat_template`
argument (set afterwards), InstructBLIP-Video's crashes on a tokenizer with a named `video_token` (its `__init__`
reads it as an `AddedToken`), and its `__call__` takes frames as `images=`.

Example:
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("instructblipvideo")
    >>> inputs = tiny_inputs(processor, "instructblipvideo")
    >>> int(INSTRUCTBLIP_VIDEO.expansion_mask(model.config, inputs["input_ids"]).sum()) == 4 * model.config.num_query_tokens
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .registry import Architecture, register, unwrap, wrap


@dataclass(frozen=True)
class QFormerArchitecture(Architecture):
    frames: int = 1  # the processor prepends num_query_tokens placeholders per frame, for this many frames
    hides: str = "the query-token placeholders the processor prepends to the prompt"
    embeds_prompt: bool = True

    def language_model(self, model):
        return model.language_model.model

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """The leading run of placeholders of each row: `num_query_tokens * frames` of them, as the processor
        prepends them; a row with another count, or a placeholder after its text began, is refused."""
        placeholders = self.placeholder_mask(config, input_ids)
        leading = placeholders.int().cumprod(dim=1).bool()
        expected = config.num_query_tokens * self.frames
        counts = leading.sum(dim=1)
        wrong = ((counts != expected) & placeholders.any(dim=1)).nonzero().flatten().tolist()
        if wrong:
            raise ValueError(f"Prompt row(s) {wrong} start with {counts[wrong].tolist()} image/video placeholders, not "
                             f"the {expected} ({config.num_query_tokens} query tokens x {self.frames} frame(s)) that "
                             f"{self.name}'s processor prepends: build the inputs with processor(text=..., images=...).")
        self.check_covered(config, input_ids, leading, "the placeholders prepended to the prompt",
                           "Write no image/video token into the text: the processor prepends them.")
        return leading

    def prepare(self, model) -> None:
        if not model.config.use_decoder_only_language_model:
            raise ValueError(f"This {self.name} checkpoint's language model is an encoder-decoder "
                             f"({model.config.text_config.model_type}): its decoder cross-attends to the image's "
                             "queries, with no visual span in its prompt to hide. pnd serves the decoder-only ones "
                             "(OPT, Vicuna/Llama).")
        wrap(model, _FEATURES[self.frames > 1], _without_language_keywords)
        wrap(model, "forward", _text_forward, model)

    def unprepare(self, model) -> None:
        for name in (_FEATURES[self.frames > 1], "forward"):
            unwrap(model, name)


_FEATURES = ("get_image_features", "get_video_features")
# keywords of the language model that the family's forward also hands its vision tower and Q-Former, whose
# embeddings then fail on the language model's position ids (transformers 5.23)
_LANGUAGE_KEYWORDS = ("position_ids", "past_key_values", "cache_position", "logits_to_keep")


def _text_forward(model, forward, *args, **kwargs):
    """`forward` that also runs without pixels, as the language model (`CaptionScorer` continues a prompt's cache
    with caption tokens alone; the family's forward requires `pixel_values` and `qformer_input_ids`)."""
    if args or kwargs.get("pixel_values") is not None or kwargs.get("mm_encoder_outputs") is not None:
        return forward(*args, **kwargs)
    text = {k: v for k, v in kwargs.items() if k not in ("pixel_values", "qformer_input_ids", "qformer_attention_mask",
                                                         "mm_encoder_outputs", "interpolate_pos_encoding")}
    return model.language_model(**text)


def _without_language_keywords(features, *args, **kwargs):
    """`features` (the model's `get_image_features` or `get_video_features`) without the language model's keywords."""
    return features(*args, **{k: v for k, v in kwargs.items() if k not in _LANGUAGE_KEYWORDS})


INSTRUCTBLIP_VIDEO = register(QFormerArchitecture(name="InstructBLIP-Video", model_types=("instructblipvideo",),
                                                  pixel_keys=("pixel_values",), frames=4,
                                                  takes_images=False))
INSTRUCTBLIP = register(QFormerArchitecture(name="InstructBLIP", model_types=("instructblip",),
                                            pixel_keys=("pixel_values",)))
BLIP_2 = register(QFormerArchitecture(name="BLIP-2", model_types=("blip-2",), pixel_keys=("pixel_values",)))
