"""Contrast priors: the prior rows run the whole model (vision tower included) on another input (docs/methods.md).

`PriorNormalized(alpha, prior="inputs")` with `generate(..., prior_inputs=contrast)`: the contrast rows are the
processor's outputs for another prompt (ICD: `icd_inputs`, the same visual input after a disturbance instruction),
one row per prompt, of any length. `prior="noise"` (VCD): the same inputs with `vcd_noise`'d pixels.

Layout. The conditioned prompt (length L) and the contrast prompt (length L') are left-padded to one length
max(L, L') before `generate` runs (the conditioned rows by `pad_to`, the prompt `generate` sees; the padding is cut
from the returned sequences), so that the paired cache holds [conditioned rows; contrast rows] in slots of one
length, each row with its own attention mask over the prompt slots (`PairedCache.prior_attends`). The contrast's
prefill is a plain forward of the model on the contrast inputs (pixels through the vision tower) into a cache of its
own, once per prompt, then repeated for the beams / returned sequences as `generate` repeats the conditioned rows;
its generated tokens sit at the contrast prompt's next positions (`PriorPrefill.position_offset`). Every decoding
step is then the paired step of any prior.

Example:
    >>> import torch
    >>> x = torch.zeros(2, 3)
    >>> torch.equal(vcd_noise(x, noise_step=500, seed=0), vcd_noise(x, noise_step=500, seed=0))
    True
"""

from __future__ import annotations

import copy
import functools
import numbers
from collections.abc import Mapping

import torch
from transformers import DynamicLayer, StaticLayer

from .._compat.cache_rows import cache_from_layers, layer_states, map_states
from .._compat.generation import inferred_attention_mask
from ..validation import check_pixels, refused_name
from .cache import is_empty
from .prior import PriorPrefill, default_position_ids

CONTRASTS = ("inputs", "noise", "same")  # priors from an input run through the whole model: another, noised, the same
NOISE_STEPS = 1000  # VCD's diffusion schedule (vcd_utils/vcd_add_noise.py)
ICD_INSTRUCTION = "You are a confused object detector to provide a fuzzy overview or impression of the image."
_SHARED = "pnd_shared_visual_inputs"  # a contrast's mark: the visual inputs it shares with the prompt (`_sharing`)
_HOW = "pass prior_inputs=<the processor's outputs for the contrast prompt> (pnd.icd_inputs builds ICD's)"


def check_noise_step(noise_step, seed) -> None:
    """Raise a ValueError naming the problem unless `noise_step` is an int in [0, 1000) and `seed` an int."""
    if isinstance(noise_step, bool) or not isinstance(noise_step, numbers.Integral) or not 0 <= noise_step < NOISE_STEPS:
        raise ValueError(f"noise_step must be an integer in [0, {NOISE_STEPS}) (VCD's default: 500), got "
                         f"{noise_step!r}.")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not -2**63 <= seed < 2**64:
        raise ValueError(f"seed must be an integer in [-2**63, 2**64) (a torch.Generator's seeds), got {seed!r}.")


def vcd_noise(pixel_values: torch.Tensor, noise_step: int = 500, seed: int = 0) -> torch.Tensor:
    """VCD's distorted pixels (Leng et al., CVPR 2024): the forward diffusion process at step `noise_step`,
    `sqrt(abar_T) * x + sqrt(1 - abar_T) * eps`, on the processor's normalized pixel values.

    `betas = sigmoid(linspace(-6, 6, 1000)) * (0.5e-2 - 1e-5) + 1e-5`, `abar = cumprod(1 - betas)`, indexed at
    `noise_step` as VCD's `add_diffusion_noise` indexes it (0-based); `eps` is drawn on the CPU from
    `torch.Generator().manual_seed(seed)` in float32, then cast to the pixels' dtype and device (the last draw is kept
    there for pixels of the same shape, seed, device and dtype).

    Example:
        >>> x = torch.ones(1, 4)
        >>> vcd_noise(x, noise_step=0).sub(x).abs().max() < 0.05  # step 0: almost no noise
        tensor(True)
    """
    check_noise_step(noise_step, seed)
    noise_step, seed = int(noise_step), int(seed)  # numpy's too
    if not torch.is_tensor(pixel_values) or not pixel_values.is_floating_point():
        raise ValueError("vcd_noise takes the processor's normalized pixel values (a floating-point tensor), got "
                         f"{type(pixel_values).__name__}{'' if not torch.is_tensor(pixel_values) else ' of ' + str(pixel_values.dtype)}.")
    steps = torch.linspace(-6, 6, NOISE_STEPS, dtype=torch.float32, device="cpu")  # float32 as VCD, any default dtype
    betas = torch.sigmoid(steps) * (0.5e-2 - 1e-5) + 1e-5
    abar = torch.cumprod(1 - betas, dim=0)[noise_step]
    x = pixel_values
    eps = _gaussian(tuple(x.shape), seed, x.device, x.dtype)
    return abar.sqrt().to(x.device, x.dtype) * x + (1 - abar).sqrt().to(x.device, x.dtype) * eps


@functools.lru_cache(maxsize=1)  # the last draw, kept where it is used: a video of the same shape reuses it
def _gaussian(shape: tuple, seed: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """VCD's `eps`: standard normal noise of `shape` drawn on the CPU from `seed` in float32 (the same noise on every
    device), then cast to `dtype` on `device`. Drawing it costs more than the rest of the noising (about 90 ms on a CPU
    core for 32 frames of 384 px): a second video of the same shape, as a benchmark's or an evaluation's frames are,
    reuses it."""
    eps = torch.randn(shape, generator=torch.Generator("cpu").manual_seed(seed), dtype=torch.float32, device="cpu")
    return eps.to(device, dtype)


def icd_inputs(processor, messages, instruction: str = ICD_INSTRUCTION, **processor_kwargs):
    """ICD's contrast inputs (Wang et al., Findings ACL 2024): the same chat messages with a disturbance instruction
    at the start of the first user text part (after the visual parts), through the processor.

    Args:
        processor: the model's processor (with a chat template).
        messages: one conversation (a list of {"role", "content"} messages) or a batch of them, as given to
            `processor.apply_chat_template` for the conditioned prompt.
        instruction: the disturbance instruction (ICD's default).
        **processor_kwargs: the processor's other arguments, as for the conditioned prompt (`videos=...`,
            `images=...`); `return_tensors` defaults to "pt", `padding` to True. Without `images` / `videos` the
            visuals are read from the messages (`{"type": "image", "image": ...}`), as
            `processor.apply_chat_template(..., tokenize=True)` reads them.

    Returns:
        The processor's outputs: pass them as `generate(..., prior_inputs=...)` with
        `PriorNormalized(alpha, prior="inputs", combine="contrastive")`.
    """
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError(f"instruction must be a non-empty string, got {instruction!r}.")
    batch = isinstance(messages, (list, tuple)) and bool(messages) and isinstance(messages[0], (list, tuple))
    conversations = [_disturbed(c, instruction) for c in (messages if batch else [messages])]
    processor_kwargs.setdefault("return_tensors", "pt")
    processor_kwargs.setdefault("padding", True)
    if not any(key in processor_kwargs for key in ("images", "videos")):  # the visuals are in the messages
        return processor.apply_chat_template(conversations if batch else conversations[0], add_generation_prompt=True,
                                             tokenize=True, return_dict=True, **processor_kwargs)
    texts = [processor.apply_chat_template(c, add_generation_prompt=True) for c in conversations]
    return processor(text=texts, **processor_kwargs)


def _disturbed(conversation, instruction: str) -> list:
    """A copy of `conversation` with `instruction` first in its first user message's text."""
    if not isinstance(conversation, (list, tuple)) or not all(isinstance(m, Mapping) for m in conversation):
        raise ValueError("messages must be a chat conversation (a list of {'role': ..., 'content': ...} dicts) or a "
                         f"list of them, got {type(conversation).__name__}.")
    conversation = copy.deepcopy(list(conversation))
    user = next((m for m in conversation if m.get("role") == "user"), None)
    if user is None:
        raise ValueError("messages hold no 'user' message: ICD puts its instruction before the user's text.")
    content = user.get("content")
    if isinstance(content, str):
        user["content"] = f"{instruction} {content}"
        return conversation
    if not isinstance(content, list) or not all(isinstance(part, Mapping) for part in content):
        raise ValueError("the user message's 'content' must be a text or a list of parts ({'type': 'text', 'text': "
                         f"...}}, {{'type': 'video'}}, ...), got {content!r}.")
    text = next((part for part in content if part.get("type") == "text"), None)
    if text is None:  # no text: the instruction after the visual parts
        content.append({"type": "text", "text": instruction})
    else:
        text["text"] = f"{instruction} {text['text']}"
    return conversation


def prepare_contrast(model, architecture, normalizer, config, kwargs: dict, prior_inputs) -> tuple[dict | None, int]:
    """Check `prior_inputs` against the processor's prior mode and build the contrast inputs of a generate call
    (`config`: its generation config; `kwargs`: its arguments, all by name). A prompt given without an attention mask
    gets the one generate infers (from the padding token), in `kwargs`.

    Returns (contrast inputs, one row per prompt, or None for the other priors; the left padding added to the
    conditioned prompt in `kwargs`, in place, to the contrast's length)."""
    prior = normalizer.prior
    if prior != "inputs" and prior_inputs is not None:
        raise ValueError(f"generate got prior_inputs, which only PriorNormalized(alpha, prior='inputs') reads (this "
                         f"processor has prior={prior!r}): drop prior_inputs or use prior='inputs'.")
    if prior not in CONTRASTS or not normalizer.needs_prior:
        return None, 0
    if prior == "inputs" and prior_inputs is None:
        raise ValueError(f"PriorNormalized(prior='inputs') needs the contrast prompt: {_HOW}.")
    if not is_empty(kwargs.get("past_key_values")):
        raise ValueError(f"{refused_name(normalizer)} does not continue a conversation from past_key_values yet: "
                         "pass the whole conversation as input_ids, without past_key_values.")
    if kwargs.get("input_ids") is None:
        raise ValueError(f"{refused_name(normalizer)} needs generate(input_ids=...) from the model's processor, not "
                         "inputs_embeds.")
    if kwargs.get("attention_mask") is None:
        kwargs["attention_mask"] = inferred_attention_mask(model, config, kwargs["input_ids"])
    if prior == "noise":
        return _padded(architecture, kwargs, _noised(architecture, kwargs, normalizer))
    if prior == "same":  # ONLY: the conditioned inputs, with an intervention on their rows
        return _sharing(architecture, {k: v for k, v in kwargs.items() if torch.is_tensor(v)}, kwargs), 0
    contrast = _given(prior_inputs, kwargs["input_ids"])
    check_pixels(contrast, architecture.pixel_keys, "generate's prior_inputs")
    contrast, pad = _padded(architecture, kwargs, contrast)
    return _sharing(architecture, contrast, kwargs), pad


def _sharing(architecture, contrast: dict, kwargs: dict) -> dict:
    """`contrast`, marked (`_SHARED`) with its visual inputs (pixels and what describes them) where they are all the
    prompt's own (ICD's contrast on the same video): the vision tower's outputs for the prompt then serve it too."""
    tokens = ("input_ids", "attention_mask", "position_ids", "token_type_ids", *architecture.token_inputs)
    visual = tuple(k for k, v in contrast.items() if torch.is_tensor(v) and k not in tokens)
    if visual and all(_same(kwargs.get(k), contrast[k]) for k in visual):  # once per generate call
        contrast[_SHARED] = visual
    return contrast


def _same(given, tensor: torch.Tensor) -> bool:
    """Whether `given` is `tensor`, or a tensor of its shape and values on its device."""
    return given is tensor or (torch.is_tensor(given) and given.shape == tensor.shape and given.device == tensor.device
                               and torch.equal(given, tensor))


def _noised(architecture, kwargs: dict, normalizer) -> dict:
    """The conditioned inputs with VCD's noise on their pixel values."""
    contrast = {k: v for k, v in kwargs.items() if torch.is_tensor(v)}
    patches = architecture.patch_coordinates  # Kosmos-2.5: flattened patches, their coordinates first
    pixels = [k for k in architecture.pixel_keys
              if (k.startswith("pixel_values") or patches) and contrast.get(k) is not None]
    if not pixels:
        raise ValueError(f"PriorNormalized(prior='noise') distorts the pixel inputs, but generate got none of "
                         f"{', '.join(architecture.pixel_keys)}: pass the processor's outputs whole.")
    for key in pixels:
        noised = vcd_noise(contrast[key][..., patches:], normalizer.noise_step, normalizer.seed)
        contrast[key] = torch.cat([contrast[key][..., :patches], noised], -1)
    return contrast


def _given(prior_inputs, input_ids: torch.Tensor) -> dict:
    """The user's contrast inputs, checked: the processor's tensors, one left-padded row per prompt."""
    if not isinstance(prior_inputs, Mapping) or not torch.is_tensor(prior_inputs.get("input_ids")):
        raise ValueError(f"prior_inputs must be the processor's outputs (a mapping with input_ids), got "
                         f"{type(prior_inputs).__name__}: {_HOW}.")
    contrast = {k: v.to(input_ids.device) for k, v in prior_inputs.items() if torch.is_tensor(v)}
    ids = contrast["input_ids"]
    if ids.ndim != 2 or ids.shape[0] != input_ids.shape[0]:
        raise ValueError(f"prior_inputs has input_ids of shape {tuple(ids.shape)}: it needs one row per prompt, "
                         f"{input_ids.shape[0]} rows (the contrast prompt of each), any length.")
    if contrast.get("inputs_embeds") is not None:
        raise ValueError("prior_inputs must hold input_ids, not inputs_embeds.")
    _with_mask(contrast)
    if not bool(contrast["attention_mask"][:, -1].all()):
        raise ValueError("prior_inputs rows end with padding (attention_mask 0 in the last slot): build them with "
                         "processor.tokenizer.padding_side = 'left', as for the conditioned prompt.")
    return contrast


def _with_mask(inputs: dict) -> dict:
    """`inputs`, given an attention mask of ones where they have none (generate's own for an unpadded prompt)."""
    if inputs.get("attention_mask") is None:
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    return inputs


def _padded(architecture, kwargs: dict, contrast: dict) -> tuple[dict, int]:
    """Left-pad the conditioned prompt (in `kwargs`) and the contrast prompt to the same length; the contrast and the
    padding added to the conditioned prompt."""
    length = max(kwargs["input_ids"].shape[1], contrast["input_ids"].shape[1])
    pad = length - kwargs["input_ids"].shape[1]
    if pad and kwargs.get("position_ids") is not None:
        raise ValueError("generate got position_ids, but the contrast prompt is longer than the prompt, which pnd pads to "
                         "its length: leave position_ids out (generate computes them).")
    for inputs in (kwargs, contrast):  # each with its attention mask (`prepare_contrast`, `_given`)
        extra = length - inputs["input_ids"].shape[1]
        if extra:
            ids = inputs["input_ids"]  # padding ids: the row's last token, text (a visual id would be read as one)
            inputs["input_ids"] = torch.cat([ids[:, -1:].expand(-1, extra), ids], 1)
            for key in dict.fromkeys(("attention_mask", "token_type_ids", *architecture.token_inputs)):  # each once
                if torch.is_tensor(inputs.get(key)):
                    inputs[key] = torch.nn.functional.pad(inputs[key], (extra, 0), value=0)
    return contrast, pad


def count_past_padding(config, kwargs: dict, pad: int) -> None:
    """Make generate's lengths count from the prompt as given, past the `pad` slots `_padded` put before it: a
    `max_length` or `min_length` of the whole sequence (no max_new_tokens / min_new_tokens, which count from the
    prompt's end) grows by `pad`, in `kwargs` and in `config` (generate's config for this call); `no_repeat_ngram_size`,
    which would read the padding as text, is refused."""
    if config.no_repeat_ngram_size:
        raise ValueError(f"no_repeat_ngram_size={config.no_repeat_ngram_size} reads the n-grams of the whole sequence, "
                         f"and pnd left-pads the prompt by {pad} slots to the length of the contrast prompt (prior_inputs,"
                         " longer): remove no_repeat_ngram_size (repetition_penalty works), or give a contrast prompt "
                         "no longer than the prompt.")
    if config.max_new_tokens is None:
        kwargs["max_length"] = config.max_length = config.max_length + pad
    if config.min_new_tokens is None and config.min_length:
        kwargs["min_length"] = config.min_length = config.min_length + pad


def contrast_prefill(model, forward, contrast: dict, prefill_kwargs: dict) -> PriorPrefill:
    """The contrast rows' prefill: `forward` (the model's own) on the contrast inputs, into a cache of their own, then
    each row repeated as `generate` repeated the conditioned prompt's (beams, returned sequences)."""
    shared = contrast.get(_SHARED, ())
    contrast = {k: v for k, v in contrast.items() if k not in ("labels", _SHARED)}  # PaliGemma's labels: no loss here
    ids, mask = contrast["input_ids"], contrast["attention_mask"]
    repeats = prefill_kwargs["input_ids"].shape[0] // ids.shape[0]
    others = {k: v for k, v in contrast.items() if k not in ("input_ids", "attention_mask", "position_ids")}
    positions = default_position_ids(model, ids, mask, **others)  # as generate gives them (a given one is generate's)
    encoded = prefill_kwargs.get("mm_encoder_outputs")
    if shared and encoded and repeats == 1:  # generate ran the vision tower on the prompt's visual inputs, the same
        # as the contrast's: its outputs in place of those inputs (where generate took them out of the first call's)
        contrast = {k: v for k, v in contrast.items() if k not in shared or prefill_kwargs.get(k) is not None}
        contrast["mm_encoder_outputs"] = encoded
    cache = cache_from_layers(model.config.get_text_config(decoder=True))
    outputs = forward(**{**contrast, "position_ids": positions, "past_key_values": cache, "use_cache": True,
                         "logits_to_keep": 1})

    def rows(t: torch.Tensor, dim: int = 0) -> torch.Tensor:
        return t.repeat_interleave(repeats, dim=dim) if repeats > 1 else t

    offset = prefill_kwargs["position_ids"][..., -1] - rows(positions[..., -1], dim=-1)
    return PriorPrefill(logits=rows(outputs.logits[:, -1]), layers=[map_states(rows, s) for s in layer_states(cache)],
                        attends=rows(mask.bool()), position_offset=offset)


def without_padding(out, pad: int):
    """`generate`'s output with the `pad` slots `_padded` put before the conditioned prompt cut off its sequences and
    its returned cache's full-attention layers (padding in every row: the cache of the prompt as given; a static
    layer's slots moved to its start)."""
    if not pad:
        return out
    if torch.is_tensor(out):
        return out[:, pad:]
    out.sequences = out.sequences[:, pad:]
    cache = getattr(out, "past_key_values", None)
    for layer in getattr(cache, "layers", ()):
        if type(layer) is DynamicLayer and layer.keys is not None and layer.keys.ndim == 4:
            layer.keys, layer.values = layer.keys[:, :, pad:], layer.values[:, :, pad:]
        elif type(layer) is StaticLayer and layer.is_initialized:
            length = int(layer.cumulative_length)
            for states in (layer.keys, layer.values):
                states[:, :, : length - pad] = states[:, :, pad:length].clone()
                states[:, :, length - pad : length] = 0
            layer.cumulative_length.sub_(pad)
    return out

