"""Prior-normalized caption scoring for retrieval, on the same prior construction as decoding.

For each video the prompt prefix (vision tower + prompt) runs once and its KV-cache is shared by all
candidate captions, scored in batches by teacher forcing (`prefix.py`). Each caption's prior is computed once per
prompt layout (it does not depend on the pixels), from the same text-only prefill `PriorNormalized`
uses, and reused while the layout stays the same. Scores are `log P(t | v) - alpha * log P(t)` summed
over the caption tokens, or averaged (`reduction="mean"`). `score_prompt` scores answers to a prompt
you built yourself (the lmms-eval model's `loglikelihood` uses it).

Example:
    >>> import pnd
    >>> from pnd.testing import tiny_model, random_video
    >>> model, processor = tiny_model("llava_onevision")
    >>> scorer = pnd.CaptionScorer(model, processor, alpha=0.9)
    >>> scorer.score([random_video(0), random_video(1)], ["a red circle", "a blue square"]).shape
    torch.Size([2, 2])
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import torch

from .._compat.weights import weights_state
from ..architectures import architecture_for
from ..architectures.reported import EXPANSION_KEY, bind_processor, expansions_given
from ..decoding.prior import masked_prefill
from ..io.prompts import pixel_values_kwargs, video_prompt
from ..io.video import read_video
from ..validation import check_alpha_and_prior, check_frames, check_image, checked_plausibility, real_number
from .prefix import Prefix, conditioned_prefixes, forced_logprobs, teacher_forced
from .tokens import TokenScore, score_tokens

PRIORS = ("masked", "text")  # the priors the scorer computes itself ("blank" needs generate's encoder)


class ScoringInputs(dict):
    """Model inputs of one (video, caption) pair, usable as `model(**inputs)`, and the caption's span.

    The dict holds model inputs only; the span is the attribute `inputs.caption_span`, `(start, end)`: the
    scored tokens are `input_ids[0, start:end]`, predicted at positions start-1..end-2.
    """

    def __init__(self, inputs: dict, caption_span: tuple[int, int]):
        super().__init__(inputs)
        self.caption_span = caption_span


class ScoreParts(NamedTuple):
    """(videos x captions) matrices: normalized = conditional - alpha * prior (after the reduction)."""

    normalized: torch.Tensor
    conditional: torch.Tensor
    prior: torch.Tensor


class CaptionScorer:
    """Score every caption against every video with prior normalization.

    Args:
        model, processor: a supported Hugging Face vision-language model and its processor.
        alpha: prior weight in [0, 1] (0.8-1.0 works best for retrieval in BLiM).
        reduction: "sum" (log-likelihood of the caption) or "mean" (per caption token).
        prompt: the user instruction placed after the video; the caption is the assistant's answer.
        prior: "masked" (default) or "text", as for `PriorNormalized`.
        modality: "video" (default) or "image".
        frames: frames sampled from a video given as a file path (deprecated: pass frames, see `score`).
        batch_size: captions scored per forward call (bounds memory).
        pack_captions: score a batch's captions packed into one row over a single copy of the video prefix
            (memory flat in `batch_size`) where the model runs SDPA attention without a sliding window or
            recurrent layers; False: one row per caption over a copy of the prefix each (the benchmark's
            baseline). Same scores.

    Scores (and their `ScoreParts`) are float32 tensors on the CPU, whatever the model's device or dtype: a few
    numbers per caption, gathered across prompts into ranking matrices; each batch of captions is copied to the CPU
    once.

    Example:
        >>> import pnd
        >>> from pnd.testing import tiny_model, random_video
        >>> model, processor = tiny_model("qwen2_vl")
        >>> parts = pnd.CaptionScorer(model, processor).score([random_video(0)], ["a cat", "a dog"], return_parts=True)
        >>> parts.normalized.shape
        torch.Size([1, 2])
    """

    def __init__(self, model, processor, alpha: float = 0.9, reduction: str = "mean",
                 prompt: str = "Describe the video.", prior: str = "masked", modality: str = "video",
                 frames: int = 8, batch_size: int = 16, pack_captions: bool = True):
        check_alpha_and_prior(alpha, prior, modes=PRIORS)
        if reduction not in ("sum", "mean"):
            raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}.")
        if modality not in ("video", "image"):
            raise ValueError(f"modality must be 'video' or 'image', got {modality!r}.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r} ({type(batch_size).__name__}).")
        if not isinstance(pack_captions, bool):
            raise ValueError(f"pack_captions must be True or False, got {pack_captions!r} ({type(pack_captions).__name__}).")
        architecture_for(model).prepare(model)
        bind_processor(model, processor)
        self.model, self.processor = model, processor
        self.alpha, self.reduction, self.prior_mode = real_number(alpha), reduction, prior
        self.modality, self.frames, self.batch_size = modality, frames, batch_size
        self.pack_captions = pack_captions
        self._prior_layout, self._priors = None, {}  # caption tokens -> summed prior log-prob, for that layout
        self.prompt_text = video_prompt(processor, prompt, modality)

    # -- inputs ---------------------------------------------------------------------------------

    def prompt_inputs(self, video, where: str | None = None) -> dict:
        """Processor outputs for the prompt with one video (a path, or frames: `pnd.validation.check_frames`) or image;
        `where` names it in errors."""
        if isinstance(video, (str, Path)):
            warnings.warn("CaptionScorer reads no files from pnd 0.4 on: pass frames, "
                          f"pnd.io.video.read_video({str(video)!r}, frames={self.frames}).", DeprecationWarning,
                          stacklevel=3)
            video = read_video(video, self.frames)
        elif self.modality == "video":
            check_frames(video, where)
        else:
            check_image(video, where)
        key = "videos" if self.modality == "video" else "images"
        inputs = self.processor(text=[self.prompt_text], **{key: [video]}, return_tensors="pt",
                                **pixel_values_kwargs(self.processor))  # Fuyu's patches as pixel_values too
        return self.on_device(inputs)

    def on_device(self, inputs) -> dict:
        """`inputs` with every tensor on the model's device, its pixels in the model's dtype."""
        return architecture_for(self.model).on_model(self.model, inputs)

    def caption_ids(self, caption: str) -> list[int]:
        """The token ids of `caption`; refused when it has none, or holds the model's image/video placeholders (the
        model refuses a placeholder without its visual features, so the score would not be two plain forwards)."""
        if not isinstance(caption, str):
            raise TypeError(f"A caption must be a str, got {type(caption).__name__} {caption!r}.")
        ids = self.processor.tokenizer(caption, add_special_tokens=False).input_ids
        if not ids:
            raise ValueError(f"Caption {caption!r} has no tokens.")
        ids_on_host = torch.tensor([ids], device="cpu")  # a check of the token ids: no copy to the model's device
        placeholders = architecture_for(self.model).placeholder_mask(self.model.config, ids_on_host)[0]
        if placeholders.any():
            found = dict.fromkeys(self.processor.tokenizer.decode([i]) for i, p in zip(ids, placeholders.tolist()) if p)
            raise ValueError(f"Caption {caption!r} holds the model's image/video placeholder(s) {', '.join(map(repr, found))}: "
                             "the model takes one only with its visual features, so it cannot be scored as text. Remove "
                             "it from the caption.")
        return ids

    def build_inputs(self, video, caption: str) -> ScoringInputs:
        """The exact tokens one score is computed on: prompt + caption, and the caption's token span.

        `model(**inputs)` runs the conditioned pass; the score is the sum (or mean) of the
        log-probabilities of the tokens in `inputs.caption_span`, minus alpha times the same under the
        masked prior (visual positions masked, position ids kept).
        """
        inputs = self.prompt_inputs(video)
        caption = torch.tensor([self.caption_ids(caption)], device=inputs["input_ids"].device)
        start = inputs["input_ids"].shape[1]
        inputs["input_ids"] = torch.cat([inputs["input_ids"], caption], 1)
        inputs["attention_mask"] = torch.cat([inputs["attention_mask"], torch.ones_like(caption)], 1)
        appended = {**architecture_for(self.model).appended_types(), EXPANSION_KEY: 0}  # the caption's tokens: text
        for key, value in appended.items():
            if key in inputs:
                inputs[key] = torch.cat([inputs[key], inputs[key].new_full(caption.shape, value)], 1)
        inputs.pop("labels", None)  # PaliGemma's processor adds them (for the prompt): no loss here
        return ScoringInputs(inputs, (start, start + caption.shape[1]))

    # -- scoring --------------------------------------------------------------------------------

    @torch.no_grad()
    def score(self, videos, captions: list[str], return_parts: bool = False):
        """(len(videos) x len(captions)) normalized scores, or `ScoreParts` with return_parts=True.

        A video is what the processor takes: frames (`pnd.validation.check_frames`) as `pnd.io.video.read_video`
        gives them, or an image (modality="image"). A file path still works, with a DeprecationWarning.
        """
        _check_list(videos, "videos", "video")
        _check_list(captions, "captions", "caption")
        tokens = [self.caption_ids(c) for c in captions]
        rows = [self._score_tokens(self.prompt_inputs(video, f"videos[{i}]"), tokens) for i, video in enumerate(videos)]
        empty = ScoreParts(*[torch.empty(0, len(tokens), dtype=torch.float32, device="cpu")] * 3)
        parts = ScoreParts(*map(torch.stack, zip(*rows))) if rows else empty
        return parts if return_parts else parts.normalized

    @torch.no_grad()
    def score_prompt(self, inputs: dict, captions: list[str], return_parts: bool = False):
        """Scores (a 1-D tensor, or `ScoreParts` of them) of captions as the answer to a prompt you built.

        `inputs` are the processor's outputs for one prompt that ends where the caption starts (e.g.
        `apply_chat_template(..., add_generation_prompt=True)`), with its images or videos.
        """
        _check_list(captions, "captions", "caption")
        parts = self._score_tokens(self.on_device(inputs), [self.caption_ids(c) for c in captions])
        return parts if return_parts else parts.normalized

    @torch.no_grad()
    def score_prompts(self, inputs: dict, captions: list[list[str]], return_parts: bool = False) -> list:
        """`score_prompt` of several prompts that share nothing, their prompts run in one forward call.

        `inputs` are the processor's outputs for the prompts left-padded into one batch (row i: prompt i,
        `tokenizer.padding_side = "left"`); `captions[i]` are the answers scored after prompt i. Each
        prompt's rows of the cache, without its padding, then score its captions as `score_prompt` does.

        Returns:
            One 1-D tensor (or `ScoreParts`) per prompt.
        """
        parts = self._over_prompts(inputs, captions, self._score_prefix)
        return parts if return_parts else [p.normalized for p in parts]

    @torch.no_grad()
    def likelihoods(self, inputs: dict, captions: list[list[str]]) -> list[torch.Tensor]:
        """The plain model's `log P(t | prompt)` of each caption after each prompt, taken as `score_prompts` takes
        them (the mean or sum over the caption's tokens, by `reduction`): `ScoreParts.conditional`, without a prior, so
        a prompt may hold no image or video (lmms-eval's text-only documents)."""
        return self._over_prompts(inputs, captions, self._conditional)

    def _over_prompts(self, inputs: dict, captions: list[list[str]], score) -> list:
        """`score(prefix, token ids of its captions)` of each prompt of `inputs`, the prompts run in one forward call."""
        _check_list(captions, "captions", "list of captions")
        if len(captions) != inputs["input_ids"].shape[0]:
            raise ValueError(f"{inputs['input_ids'].shape[0]} prompt(s) in inputs but {len(captions)} list(s) of "
                             "captions; give one list per prompt.")
        results = []
        for prefix, answers in zip(conditioned_prefixes(self.model, self.processor, self.on_device(inputs)), captions):
            _check_list(answers, "captions", "caption")
            results.append(score(prefix, [self.caption_ids(c) for c in answers]))
        return results

    @torch.no_grad()
    def token_scores(self, video, caption: str, top_k: int = 5) -> list[TokenScore]:
        """What the prior did to each token of `caption` given `video`: a `pnd.scoring.tokens.TokenScore` per token.

        Each holds `log P(w | v)`, `log P(w)`, the normalized score, the shift (< 0: the prior pushed the
        token down) and the `top_k` alternatives under each; the caption's score is the sum (or mean) of
        the tokens' normalized scores.
        """
        return self.prompt_token_scores(self.prompt_inputs(video), self.caption_ids(caption), top_k)

    @torch.no_grad()
    def prompt_token_scores(self, inputs: dict, token_ids: list[int], top_k: int = 5,
                            plausibility: float | None = None) -> list[TokenScore]:
        """`token_scores` of token ids following a prompt you built (processor outputs, as for `score_prompt`).

        `plausibility` masks the normalized scores as `PriorNormalized(plausibility=...)` does.
        """
        plausibility = checked_plausibility(plausibility)
        conditional, prior = self.prompt_token_logprobs(inputs, token_ids)
        return score_tokens(conditional, prior, token_ids, self.alpha, lambda i: self.processor.tokenizer.decode([i]),
                            top_k, plausibility)

    @torch.no_grad()
    def prompt_token_logprobs(self, inputs: dict, token_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(log P(. | v), log P(.)) at each of `token_ids`' steps after a prompt you built: (len(token_ids), vocabulary)
        each in fp32, the prior this scorer's."""
        if not token_ids:
            raise ValueError("token_ids is empty: give the ids of at least one token to score.")
        prefix = self._conditioned_prefix(self.on_device(inputs))
        self._check_lengths(prefix, [token_ids])
        conditional = forced_logprobs(self.model, prefix, [token_ids])[0][0]
        return conditional, forced_logprobs(self.model, self._prior_prefix(prefix), [token_ids])[0][0]

    def _score_tokens(self, inputs: dict, tokens: list[list[int]]) -> ScoreParts:
        return self._score_prefix(self._conditioned_prefix(inputs), tokens)

    def _score_prefix(self, prefix: Prefix, tokens: list[list[int]]) -> ScoreParts:
        conditional = self._conditional(prefix, tokens)
        prior = self._reduced(self._caption_priors(prefix, tokens), tokens)
        return ScoreParts(conditional - self.alpha * prior, conditional, prior)

    def _conditional(self, prefix: Prefix, tokens: list[list[int]]) -> torch.Tensor:
        self._check_lengths(prefix, tokens)
        return self._reduced(self._caption_logprobs(prefix, tokens), tokens)

    def _reduced(self, summed: torch.Tensor, tokens: list[list[int]]) -> torch.Tensor:
        """Each caption's summed log-probabilities, or their mean over its tokens (`reduction`)."""
        if self.reduction == "sum":
            return summed
        return summed / torch.tensor([len(t) for t in tokens], dtype=summed.dtype, device=summed.device)

    def _check_lengths(self, prefix: Prefix, tokens: list[list[int]]) -> None:
        """A ValueError for a caption whose last token would sit past the model's positions."""
        limit = getattr(self.model.config.get_text_config(decoder=True), "max_position_embeddings", None)
        if limit is None:
            return
        first = int(prefix.next_positions.max())  # the first caption token's position
        for i, t in enumerate(tokens):
            if first + len(t) > limit:
                raise ValueError(f"Caption {i} has {len(t)} tokens: after the {first}-position prompt it would need "
                                 f"{first + len(t)} positions, more than the model's {limit} "
                                 "(max_position_embeddings). Shorten it.")

    def _conditioned_prefix(self, inputs: dict) -> Prefix:
        if inputs["input_ids"].shape[0] != 1:
            raise ValueError(f"inputs hold {inputs['input_ids'].shape[0]} prompts; this takes one (score_prompts "
                             "takes a left-padded batch of them).")
        return conditioned_prefixes(self.model, self.processor, inputs)[0]

    def _caption_priors(self, prefix: Prefix, tokens: list[list[int]]) -> torch.Tensor:
        """Prior log-probs of the captions, computed once per caption while the prompt layout and the model's weights
        stay the same."""
        layout = (tuple(prefix.input_ids.flatten().tolist()), tuple(prefix.positions.flatten().tolist()),
                  weights_state(self.model))
        # one layout kept (memory stays bounded over many prompts), replaced only once the new values are known
        priors = self._priors if layout == self._prior_layout else {}
        missing = list(dict.fromkeys(tuple(t) for t in tokens if tuple(t) not in priors))
        if missing:
            values = self._caption_logprobs(self._prior_prefix(prefix), [list(t) for t in missing])
            if not torch.isfinite(values).all():  # never kept: a later prompt with this layout would inherit it
                raise ValueError("The prior of these captions is not finite (NaN or inf) on this prompt; check the "
                                 "prompt's inputs (a non-finite pixel value, a model in a dtype that overflows).")
            priors = {**priors, **{t: float(v) for t, v in zip(missing, values)}}
        self._prior_layout, self._priors = layout, priors
        return torch.tensor([self._priors[tuple(t)] for t in tokens], dtype=torch.float32, device="cpu")  # on the CPU

    def _prior_prefix(self, prefix: Prefix) -> Prefix:
        with expansions_given(prefix.expansions):
            prior = masked_prefill(self.model, prefix.input_ids, prefix.attends.long(), prefix.positions,
                                   self.prior_mode, shared=prefix.layers)
        return Prefix(prefix.input_ids, prefix.positions, prior.layers, prior.attends, prior.logits,
                      next_positions=prefix.next_positions - prior.position_offset[..., None])

    def _caption_logprobs(self, prefix: Prefix, tokens: list[list[int]]) -> torch.Tensor:
        """Summed log-probabilities of each caption after the prefix, `batch_size` captions per call.

        Captions are batched in order of length, so that little of each batch is padding.
        """
        order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
        sums = torch.empty(len(tokens), dtype=torch.float32, device="cpu")  # on the CPU, whatever the model's device
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            forced = teacher_forced(self.model, prefix, [tokens[i] for i in chunk], self.pack_captions)
            sums[chunk] = forced.float().cpu()
        return sums


def _check_list(values, name: str, one: str) -> None:
    """A TypeError if `values` is a single str or path where a list of them is expected (iterating would split it)."""
    if isinstance(values, (str, Path)):
        raise TypeError(f"{name} must be a list, got the {type(values).__name__} {str(values)!r}: pass "
                        f"[{str(values)!r}] to score one {one}.")
