"""The registry behind `pnd.architectures`: the `Architecture` record, `register` and the look-ups.

An architecture decides what the prior hides: its `expansion_mask`, every token the processor inserted for an
image or video (placeholders, and for the newer families per-frame timestamps, labels and delimiters).

Example:
    >>> import torch
    >>> from pnd.architectures.registry import Architecture
    >>> from transformers import PretrainedConfig
    >>> arch = Architecture("demo", ("demo",), ("pixel_values",))
    >>> arch.expansion_mask(PretrainedConfig(image_token_id=7), torch.tensor([[1, 7, 7, 2]]))
    tensor([[False,  True,  True, False]])
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import torch

from .._compat.generation import position_ids_for_generation
from .layers import layer_plan
from .refused import REFUSED
from .reported import bound_processor, given_expansions, recalled_expansion

_REGISTRY: dict[str, Architecture] = {}
_REGISTERED_IN: dict[str, str] = {}  # model type -> the module that registered it
_REPAIR = "_pnd_repair"
_WRAPPED = "_pnd_wrapped"  # on a repair `wrap` set: the instance attribute it wrapped, or None


def repair(function):
    """Mark `function`, set on a model by `Architecture.prepare` (Kosmos-2's forward, Janus's generate), as pnd's
    repair: `pnd.attach` does not take it for the user's own, so `pnd.detach` leaves the model as it was before pnd, even where
    `CaptionScorer` or `pnd.prior_logits` prepared it first.

    Example:
        >>> is_repair(repair(lambda: None)), is_repair(print)
        (True, False)
    """
    setattr(function, _REPAIR, True)
    return function


def is_repair(function) -> bool:
    """Whether `function` is one `repair` marked."""
    return getattr(function, _REPAIR, False)


def named_like(function: functools.partial, method) -> functools.partial:
    """`function` (a partial set on a model in place of its `method`) with the method's name, docstring and signature
    (`__wrapped__`, which generate reads), not its annotations: transformers' hold forward references that cannot be
    pickled, and a model that holds the partial would not pickle (`torch.save(model)`)."""
    return functools.update_wrapper(function, method, assigned=("__module__", "__name__", "__qualname__", "__doc__"))


def wrap(owner, name: str, function, *bound) -> None:
    """Set `owner.<name>` to the `repair` `function(*bound, <owner.name as it was>, ...)`, unless one is there
    already. What it wraps may be an instance attribute (accelerate's device hook on a dispatched model's forward):
    `unwrap` puts that back. The repair is a `functools.partial` with the wrapped method's name and signature, so a
    copy of the owner (`copy.deepcopy`) gets one of its own, bound to the copy.

    Example:
        >>> import types
        >>> def plus_one(forward, text): return forward(text) + 1
        >>> owner = types.SimpleNamespace(forward=len)  # an instance attribute, as accelerate's hook is
        >>> wrap(owner, "forward", plus_one)
        >>> owner.forward("abc"), is_repair(owner.forward)
        (4, True)
        >>> unwrap(owner, "forward"); owner.forward is len
        True
    """
    wrapped = vars(owner).get(name)
    if is_repair(wrapped):
        return
    original = getattr(owner, name)
    function = repair(named_like(functools.partial(function, *bound, original), original))
    setattr(function, _WRAPPED, wrapped)
    setattr(owner, name, function)


def unwrap(owner, name: str) -> None:
    """Undo `wrap`: the instance attribute it wrapped back, or none."""
    wrapped = getattr(vars(owner).pop(name, None), _WRAPPED, None)
    if wrapped is not None:
        setattr(owner, name, wrapped)


@dataclass(frozen=True)
class Architecture:
    """What pnd needs to know about one family of vision-language models.

    The base class serves families whose processor inserts placeholder tokens only: the expansion is the
    placeholders. Families that insert more override `expansion_mask`.
    """

    name: str
    model_types: tuple[str, ...]
    pixel_keys: tuple[str, ...]  # generate() inputs that carry pixels ("blank" prior zeroes them)
    token_inputs: tuple[str, ...] = ()  # processor outputs with one entry per token (0 = text), e.g. mm_token_type_ids
    # False where the conditioned prompt attends bidirectionally inside a visual block (Gemma 3, Molmo2): the packed
    # prefill's causal split would drop that, so the prior's prefill runs as a call of its own
    causal_prompt: bool = True
    same_frame_counts: bool = False  # the processor batches videos only when they have the same number of frames
    one_video_per_call: bool = False  # the processor takes one video per call (Nemotron-H Omni): captioning splits
    # False where a per-token input (`token_inputs`) marks a template token before the expansion (ERNIE 4.5 VL routes its
    # vision start token to the vision experts): the conditioned pass computes that text differently from the prior,
    # which gives every kept token 0 (text), so the prior's prefill recomputes the text before the video
    reuses_text: bool = True
    # True: the expansion is what the bound processor reported replacing (`reported`), no token-id rule of its own
    reported: bool = False
    # True where the family's generate runs `model.language_model.generate(inputs_embeds=...)` (the Q-Former families):
    # attach pairs that language model's forward calls too (`pnd.decoding.steps.language_model_forward`)
    embeds_prompt: bool = False
    takes_images: bool = True  # False where the family takes videos only (InstructBLIP-Video: 4 frames, always)
    # leading entries of each pixel input's last axis that are patch coordinates, not pixels (Kosmos-2.5's flattened
    # patches: row, column): the blank and noise priors keep them
    patch_coordinates: int = 0
    hides: str = "the placeholder tokens"  # what the token-id rule hides, in words (`pnd models --all`)

    @property
    def reads_reported(self) -> bool:
        """Whether the expansion of some prompts is what the bound processor reported (its outputs then carry it)."""
        return self.reported

    def hidden(self) -> str:
        """What the prior hides, in words."""
        if self.reported:
            return "every replacement the processor reports (placeholders, timestamps, labels, delimiters)"
        return self.hides

    def on_model(self, model, inputs) -> dict:
        """Processor outputs where `model` runs: every tensor on its device, the pixel inputs (`pixel_keys`) in its
        dtype too (a processor writes float32 pixels; some vision towers take no other dtype than their weights').

        Example:
            >>> from pnd.testing import tiny_model
            >>> model = tiny_model("llava")[0].to(torch.bfloat16)
            >>> arch = Architecture("demo", ("demo",), ("pixel_values",))
            >>> {k: v.dtype for k, v in arch.on_model(model, {"pixel_values": torch.zeros(1),
            ...                                               "input_ids": torch.zeros(1, dtype=torch.long)}).items()}
            {'pixel_values': torch.bfloat16, 'input_ids': torch.int64}
        """
        def moved(key, value):
            pixels = key in self.pixel_keys and torch.is_floating_point(value)
            return value.to(model.device, model.dtype) if pixels else value.to(model.device)

        return {k: moved(k, v) if torch.is_tensor(v) else v for k, v in inputs.items()}

    def placeholder_ids(self, config) -> list[int]:
        """Placeholder token ids that the processor expands for images and videos."""
        ids = (getattr(config, key, None) for key in ("image_token_id", "video_token_id"))
        return [int(i) for i in ids if i is not None]

    def placeholder_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """Boolean mask of the placeholder tokens of `input_ids`."""
        ids = torch.tensor(self.placeholder_ids(config), device=input_ids.device)
        return torch.isin(input_ids, ids)

    def check_covered(self, config, input_ids: torch.Tensor, covered: torch.Tensor, where: str, fix: str) -> None:
        """Raise when a placeholder of `input_ids` lies outside `covered`, the expansion found: its extent is unknown.
        `where` names the blocks looked for, `fix` says how to build the prompt."""
        stray = self.placeholder_mask(config, input_ids) & ~covered
        if stray.any():
            rows = stray.any(-1).nonzero().flatten().tolist()
            raise ValueError(f"Prompt row(s) {rows} hold image/video tokens outside {where}, so the extent of their "
                             f"expansion cannot be determined. {fix}")

    def expansion_mask(self, config, input_ids: torch.Tensor) -> torch.Tensor:
        """Boolean mask (batch, L) of the visual expansion of a prompt from its token ids: what the prior hides
        (docs/design.md §1). The base rule: the placeholders."""
        if self.reported:
            raise ValueError(f"{self.name}'s visual expansion is what its processor reports replacing, not a rule on "
                             "token ids: use expansion(model, input_ids) after pnd.attach(model, processor).")
        return self.placeholder_mask(config, input_ids)

    def expansion(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The expansion of `model`'s prompts: what the bound processor reported replacing for a `reported` family,
        else `expansion_mask` (the token-id rule)."""
        if self.reported:
            return self.reported_expansion(model, input_ids, attention_mask,
                                           f"{self.name}'s visual expansion is what its processor reports replacing")
        return self.expansion_mask(model.config, input_ids)

    def reported_expansion(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                           why: str) -> torch.Tensor:
        """What the processor reported replacing in these prompts (`reported.recalled_expansion`): the expansion
        the inputs carried, else the one the processor bound to `model` remembered; with neither a carried expansion
        nor a bound processor, a ValueError that starts with `why`."""
        processor = bound_processor(model, why, required=given_expansions() is None)
        return recalled_expansion(processor, input_ids, attention_mask, self.name,
                                  self.placeholder_mask(model.config, input_ids))

    def check_video_batch(self, videos) -> None:
        """A ValueError if the processor cannot batch these videos ((frames, 3, H, W) each) together."""
        counts = sorted({len(video) for video in videos})
        if self.same_frame_counts and len(counts) > 1:
            raise ValueError(f"{self.name}'s processor cannot batch videos with different frame counts (got "
                             f"{counts}): give every video of a batch the same number of frames, or one video a batch.")

    def bidirectional_prefix(self, inputs: dict | None, attention_mask: torch.Tensor) -> torch.Tensor | None:
        """(batch, L) bool: the prompt slots that attend to each other both ways in the conditioned pass (a prefix LM's
        prefix, `pnd/architectures/prefix_lm.py`); None for a causal prompt. `inputs` are the processor's outputs
        given with the prompt, None where only its token ids are known."""
        return None

    def appended_types(self) -> dict[str, int]:
        """{per-token input: its value} for tokens appended after a prompt (a caption): text (0) for `token_inputs`."""
        return dict.fromkeys(self.token_inputs, 0)

    def blank_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        """The pixel input of the "blank" prior: uniform frames of the same shape (all zero, patch coordinates kept)."""
        blank = torch.zeros_like(pixels)
        blank[..., :self.patch_coordinates] = pixels[..., :self.patch_coordinates]
        return blank

    def language_model(self, model):
        """The decoder that runs on token ids without pixels (the prior's own prefill calls it): `language_model`, or
        `text_model` (Idefics3, SmolVLM), of the model's base model, else the base model itself (Chameleon: its
        images are tokens of its own vocabulary, so the base model is the language model)."""
        base = model.model
        return next((getattr(base, name) for name in ("language_model", "text_model") if hasattr(base, name)), base)

    def __deepcopy__(self, memo) -> Architecture:
        """Itself: one registered object per family, shared by every model of it (a copied model's repairs and
        attachment included)."""
        return self

    def suppressed_tokens(self, model) -> list[int]:
        """Token ids whose logits the model's own forward sets to the dtype's minimum after its head, which the prior's
        prefill logits get too: none, except Chameleon's VQ image tokens (`ChameleonArchitecture`)."""
        return []

    def prepare(self, model) -> None:
        """Make `model` ready for pnd (`attach`, `CaptionScorer`): a repair of a known transformers bug, if any."""

    def unprepare(self, model) -> None:
        """Undo what `prepare` changed inside the model (`detach`): nothing, unless a family's `prepare` patches a
        submodule. A repair kept on the model itself is undone with the attributes `attach` added."""

    def position_ids(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor, **inputs) -> torch.Tensor:
        """The position ids `generate` gives the conditioned pass; `inputs` are the processor's non-pixel outputs."""
        return position_ids_for_generation(model, input_ids, {"attention_mask": attention_mask, **inputs})


def register(architecture: Architecture) -> Architecture:
    """Make pnd support `architecture.model_types` (called once by each family's module); returns it."""
    module = inspect.currentframe().f_back.f_globals["__name__"]
    for model_type in architecture.model_types:
        _REGISTRY[model_type] = architecture
        _REGISTERED_IN[model_type] = module
    return architecture


def registered_in(model_type: str) -> str:
    """The module that registered a supported model type.

    Example:
        >>> registered_in("aya_vision"), registered_in("janus")
        ('pnd.architectures.families', 'pnd.architectures.janus')
    """
    return _REGISTERED_IN[model_type]


def supported_model_types() -> list[str]:
    """The Hugging Face `model_type`s pnd supports, sorted.

    Example:
        >>> import pnd
        >>> "llava_onevision" in pnd.supported_model_types()
        True
    """
    return sorted(_REGISTRY)


def registered() -> list[Architecture]:
    """Every registered architecture, once, sorted by its first model type."""
    return sorted(dict.fromkeys(_REGISTRY.values()), key=lambda architecture: architecture.model_types[0])


def architecture_for(model) -> Architecture:
    """The registered architecture of a Hugging Face model, or a ValueError listing the supported ones."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in _REGISTRY:
        why = f" ({REFUSED[model_type]})" if model_type in REFUSED else ""
        raise ValueError(
            f"pnd does not support model_type {model_type!r} ({type(model).__name__}){why}. "
            f"Supported model types: {', '.join(supported_model_types())}. "
            "Load one of these with its *ForConditionalGeneration class, or add an adapter in pnd/architectures/."
        )
    layer_plan(model.config.get_text_config(decoder=True))  # a layer type pnd has no rule for: refused, named
    return _REGISTRY[model_type]
