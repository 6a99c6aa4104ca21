"""`attach` / `detach`: run the conditioned and prior rows of `generate` through one forward call.

After `pnd.attach(model)`, a `generate` call whose `logits_processor` holds a `PriorNormalized` uses a
`PairedCache`: the first forward runs the conditioned prompt and prefills the prior rows on its text
tokens alone (in the same call where the model runs SDPA attention, `packed.py`); every later step is
one forward call on [conditioned rows; prior rows]. `generate` only ever sees the conditioned rows; the
prior logits go to the processor. Here: `attach`, `detach` and the attached `generate` (what it refuses, the cache
it hands generate); the forward calls within it are `steps.py`'s.

Example:
    >>> import pnd
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> _ = pnd.attach(model)
    >>> out = model.generate(**tiny_inputs(processor, "llava_onevision"), max_new_tokens=4,
    ...                      logits_processor=[pnd.PriorNormalized(alpha=0.5)])
    >>> pnd.detach(model)
"""

from __future__ import annotations

import functools
import inspect

import torch
from transformers import DynamicCache, DynamicLayer, StaticCache, StaticLayer

from .._compat.generation import compiles_decoding, generation_config, position_ids_for_generation
from ..architectures import architecture_for
from ..architectures.layers import check_unpadded
from ..architectures.registry import is_repair, named_like, unwrap, wrap
from ..architectures.reported import bind_processor, carried_expansions, expansions_given, release_processor
from ..attachment import Attachment, attachment_of, is_attached, remove_attachment
from ..interventions.steering import steering_strength
from ..validation import REFUSED_PRIOR, check_pixels, refused_name
from .cache import PairedCache, PairedStaticCache, SteeredStaticCache, is_empty
from .contrast import CONTRASTS, count_past_padding, prepare_contrast, without_padding
from .generation import Generation, running
from .logits_processor import PairedProcessor
from .packed import attention_named_sdpa, stop_split_attention, use_split_attention
from .prior import blank_encoder_outputs
from .steps import EMBEDDED_PROMPT, NEEDS_INPUT_IDS, PAIRED_STEP, language_model_forward, paired_forward

PREFILL_STRATEGIES = ("auto", "own_call", "own_call_no_reuse")


def attach(model, processor=None, *, prefill: str = "auto"):
    """Make `model.generate` honour `PriorNormalized` processors. Idempotent.

    Args:
        model: a supported Hugging Face vision-language model (`pnd.supported_model_types()`).
        processor: the processor that builds the model's inputs. Needed by the families whose processor writes
            text around the visual tokens that no delimiter token bounds (InternVL, SmolVLM, VideoLLaMA3: the prior
            reads the expansion with it; README, "Supported families") and by MiniCPM-V (its delimiters' token ids
            are the processor's); the others ignore it.
        prefill: how the prior's prefill runs. "auto" (default): packed into the conditioned prompt's call
            where the model runs SDPA attention without a sliding window, else a language-model call of its
            own; "own_call": always its own call; "own_call_no_reuse": its own call that also recomputes the
            text before the video (the benchmarks' baseline). All three give the same results.

    Returns:
        The model, attached.

    Example:
        >>> import pnd
        >>> from pnd.testing import tiny_model, tiny_inputs
        >>> model, processor = tiny_model("llava")
        >>> out = pnd.attach(model).generate(**tiny_inputs(processor, "llava"), max_new_tokens=2,
        ...                                  logits_processor=[pnd.PriorNormalized(0.5)])
    """
    if isinstance(processor, str):
        raise TypeError(f"pnd.attach's second argument is the processor, got the string {processor!r}: pass the "
                        f"prefill strategy by name, pnd.attach(model, prefill={processor!r}) (it moved in 0.2).")
    if prefill not in PREFILL_STRATEGIES:
        raise ValueError(f"prefill must be one of {', '.join(map(repr, PREFILL_STRATEGIES))}, got {prefill!r}.")
    if processor is not None:
        bind_processor(model, processor)
    if is_attached(model):
        if attachment_of(model).prefill != prefill:
            raise ValueError(f"The model is already attached with prefill={attachment_of(model).prefill!r}: call "
                             f"pnd.detach(model) first to attach it with prefill={prefill!r}.")
        return model
    if type(model).__module__.split(".")[0] == "peft":  # a PeftModel's generate runs the inner model's forward
        raise TypeError(f"pnd.attach takes the transformers model, got a PEFT {type(model).__name__}: attach "
                        "model.get_base_model(), which holds the adapter's layers, and generate with it.")
    architecture = architecture_for(model)  # a model pnd refuses gets nothing more than its bound processor
    attachment = attachment_of(model, create=True)
    before = set(vars(model))
    methods = ("forward", "generate", "generate_batch")  # their instance attributes: the user's, not pnd's repairs
    attachment.replaced = {name: vars(model)[name] for name in methods
                           if name in vars(model) and not is_repair(vars(model)[name])}
    attachment.architecture, attachment.prefill = architecture, prefill
    # first: a repaired forward (the Q-Former families') or generate (Janus) is the one the attached one calls
    architecture.prepare(model)
    attachment.forward, attachment.generate = model.forward, model.generate
    model.forward = _attached(paired_forward, model, attachment, attachment.forward)
    model.generate = _attached(_generate, model, attachment, attachment.generate)
    if hasattr(model, "generate_batch"):  # transformers' continuous batching (also generate(cache_implementation="paged"))
        attachment.generate_batch = model.generate_batch
        model.generate_batch = _attached(_generate_batch, model, attachment, attachment.generate_batch)
    if architecture.embeds_prompt:  # its generate runs the language model's generate, whose forward calls get paired
        wrap(_generating_model(model, architecture), "forward", language_model_forward, model)
    attachment.added = tuple(sorted(set(vars(model)) - before))
    use_split_attention(model)
    if processor is not None:  # attached: its outputs now carry their expansions
        bind_processor(model, processor)
    return model


def _attached(function, model, attachment: Attachment, own):
    """`function(model, attachment, ...)` in place of the model's `own` method (its name and signature, which
    generate reads): a `functools.partial`, so that a copy of the attached model (`copy.deepcopy`) gets one bound to
    the copy and its attachment, and runs its own weights."""
    return named_like(functools.partial(function, model, attachment), own)


def detach(model) -> None:
    """Undo `attach`: the model's own `forward` and `generate` come back (hooks set before attach too), and nothing
    of pnd stays on the model (its `Attachment`, with the bound processor, is removed).

    Args:
        model: a model; detaching one that is not attached does nothing.

    Example:
        >>> import pnd
        >>> from pnd.testing import tiny_model
        >>> model, _ = tiny_model("llava")
        >>> from pnd.attachment import attachment_of
        >>> pnd.detach(pnd.attach(model)); attachment_of(model) is None
        True
    """
    attachment = attachment_of(model)
    if attachment is not None and attachment.attached:
        _check_detachable(model, attachment)
    release_processor(model)  # its outputs no longer carry their expansions
    remove_attachment(model)
    if attachment is None or not attachment.attached:
        return
    for name in attachment.added:
        vars(model).pop(name, None)
    stop_split_attention(model)
    if attachment.architecture.embeds_prompt:
        unwrap(_generating_model(model, attachment.architecture), "forward")
    attachment.architecture.unprepare(model)
    for name, value in attachment.replaced.items():
        setattr(model, name, value)


def _check_detachable(model, attachment: Attachment) -> None:
    """Refuse a detach that would break a generate call still running, or drop what was set on the model's methods
    after attach (an accelerate hook, a user's wrapper), before anything changes."""
    if attachment.running:
        raise RuntimeError("pnd.detach: a generate call is running on this model (in this thread or another); "
                           "detach it after the call returns.")
    for name in ("forward", "generate", "generate_batch"):
        value = vars(model).get(name)
        if value is not None and not (isinstance(value, functools.partial) and value.args[1:] and
                                      value.args[1] is attachment):
            replaced_by = getattr(getattr(value, "func", value), "__qualname__", type(value).__name__)
            raise ValueError(f"pnd.detach: model.{name} was replaced after pnd.attach ({replaced_by}: an accelerate hook "
                             "or a wrapper), which detaching would drop. Remove it first (accelerate: "
                             "remove_hook_from_module(model)), then detach; or wrap the model after detaching.")


def _generate(model, attachment: Attachment, *args, **kwargs):
    """The attached `generate`: the expansion the inputs carry (`reported.EXPANSION_KEY`) is taken out of them, and read
    by the prior for the whole call. Arguments given positionally are read by their names (`by_name`)."""
    kwargs = by_name(model, attachment.generate, args, kwargs)
    call = object()
    attachment.running.append(call)  # the calls in flight, which `detach` refuses to break
    try:
        with expansions_given(carried_expansions(kwargs)):
            return _generate_carried(model, attachment, **kwargs)
    finally:
        attachment.running.remove(call)


def by_name(model, generate, args: tuple, kwargs: dict) -> dict:
    """The arguments of a `generate` call, all by name: the positional ones bound to `generate`'s parameters, and the
    prompt given as `inputs` (generate's first parameter) as the model's main input (`input_ids`), as generate reads
    it. A main input given twice is left to generate's own error."""
    named = inspect.signature(generate).bind_partial(*args).arguments if args else {}
    if twice := named.keys() & kwargs.keys():
        raise TypeError(f"generate() got multiple values for argument {sorted(twice)[0]!r}")
    kwargs = {**named, **kwargs}
    if kwargs.get("inputs") is not None and kwargs.get(model.main_input_name) is None:
        kwargs[model.main_input_name] = kwargs.pop("inputs")
    return kwargs


def _generate_batch(model, attachment: Attachment, *args, **kwargs):
    """The attached `generate_batch`: plain, with the attention under its own name "sdpa", for which transformers'
    continuous batching builds its attention masks (under pnd's, it decoded garbage or one token)."""
    with attention_named_sdpa(model):
        return attachment.generate_batch(*args, **kwargs)


def _generate_carried(model, attachment: Attachment, logits_processor=None, prior_inputs=None, **kwargs):
    normalizers = [p for p in (logits_processor or []) if isinstance(p, PairedProcessor)]
    if not normalizers:
        if prior_inputs is not None:
            raise ValueError("generate got prior_inputs but no PriorNormalized(alpha, prior='inputs') processor.")
        return attachment.generate(logits_processor=logits_processor, **kwargs)
    if len(normalizers) > 1:
        raise ValueError(f"generate got {len(normalizers)} of pnd's processors "
                         f"({', '.join(type(p).__name__ for p in normalizers)}): each pairs the model's rows in its own "
                         "way, so pass one per generate call (PriorNormalized, M3ID, PAI, ONLY or VISTA).")
    config = generation_config(model, kwargs)
    normalizer = normalizers[0]
    needs_prior = normalizer.needs_prior  # alpha=0 is plain generate, for every argument
    if needs_prior and attachment.architecture.embeds_prompt and normalizer.prior in ("blank", *CONTRASTS):
        raise ValueError(EMBEDDED_PROMPT)
    generation = Generation(attachment, normalizer, scores_are_logprobs=config.num_beams > 1,
                            input_ids=kwargs.get("input_ids"))
    generation.contrast, pad = prepare_contrast(model, attachment.architecture, normalizer, config, kwargs, prior_inputs)
    if pad:
        count_past_padding(config, kwargs, pad)
    if needs_prior:
        _refuse_unsupported(model, config, kwargs, normalizer)
        check_unpadded(model.config.get_text_config(decoder=True), kwargs.get("attention_mask"),
                       refused_name(normalizer))
        _check_visual_inputs(model, attachment.architecture, kwargs)
        kwargs["past_key_values"] = _paired_cache(model, generation, config, kwargs)
    if needs_prior and normalizer.prior == "blank":
        expand_size = max(config.num_beams, config.num_return_sequences)
        generation.blank_outputs = blank_encoder_outputs(model, attachment.architecture, kwargs, expand_size)
    with running(generation):
        out = attachment.generate(logits_processor=logits_processor, **kwargs)
    if isinstance(getattr(out, "past_key_values", None), (PairedCache, PairedStaticCache)):
        out.past_key_values = out.past_key_values.conditioned(model.config.get_text_config(decoder=True))
    return without_padding(out, pad)


def _paired_cache(model, generation: Generation, config, kwargs: dict):
    """The cache of a paired generate call: a `PairedCache`, or with cache_implementation="static" a
    `PairedStaticCache` sized as generate sizes its own, whose decoding steps run compiled where generate's would
    (VISTA's: a `SteeredStaticCache`, its steps eager)."""
    text_config = model.config.get_text_config(decoder=True)
    prompt = kwargs.get("input_ids")
    if prompt is None:
        raise ValueError(NEEDS_INPUT_IDS)
    given = kwargs.get("past_key_values")
    if not is_empty(given):
        return _continued_cache(model, generation, config, prompt, kwargs)
    kwargs.pop("past_key_values", None)  # an empty cache to fill (transformers' tests pass one): pnd's, of its kind
    if config.cache_implementation is not None:  # generate takes a cache or a cache_implementation (also "dynamic")
        kwargs["cache_implementation"] = None  # (set only then: beside a generation_config object, generate warns)
    if config.cache_implementation != "static" and not isinstance(given, StaticCache):
        return PairedCache(config=text_config)
    if not getattr(generation.attachment.architecture, "static_cache", True):
        raise ValueError(f"{refused_name(generation.normalizer)} does not support a static cache on "
                         f"{generation.attachment.architecture.name}: its own generate fails with one in transformers "
                         "(its attention mask does not span the cache's slots). Use the default dynamic cache.")
    max_length = config.max_length if config.max_new_tokens is None else prompt.shape[1] + config.max_new_tokens
    attachment = generation.attachment
    given_len = given.get_max_length() if isinstance(given, StaticCache) else 0
    attachment.static_cache_len = max(max_length - 1, config.max_cache_len or 0, given_len, attachment.static_cache_len)
    kwargs.pop("max_cache_len", None)  # used here
    if steering_strength(generation.normalizer.interventions) is not None:  # VISTA: steps of one row, eager (a
        # cache that is not compileable: generate compiles nothing)
        return SteeredStaticCache(config=text_config, max_cache_len=attachment.static_cache_len)
    cache = PairedStaticCache(text_config, max_cache_len=attachment.static_cache_len)
    if compiles_decoding(model, config):  # each paired step is one call of the model's own compiled call, which pairs
        kwargs["disable_compile"] = True  # the step's inputs itself (the glue traced with the model, `PAIRED_STEP`)
        steps = _generating_model(model, attachment.architecture) if attachment.architecture.embeds_prompt else model
        if not generation.normalizer.interventions:  # interventions: eager steps
            compiled_call = steps.get_compiled_call(config.compile_config)
            generation.decode_forward = functools.partial(compiled_call, **{PAIRED_STEP: True})
    return cache


def _continued_cache(model, generation: Generation, config, input_ids: torch.Tensor, kwargs: dict) -> PairedCache:
    """A `PairedCache` holding a copy of the conditioned rows of `past_key_values` (a cache `generate` returned); the
    first forward rebuilds the prior rows over the whole conversation, `input_ids` (docs/design.md §4)."""
    past = kwargs["past_key_values"]
    length = int(past.get_seq_length()) if isinstance(past, (DynamicCache, StaticCache)) else -1
    how = ("pass the whole conversation (the earlier prompt and answers, then the new text) as input_ids with its "
           "attention_mask (and mm_token_type_ids / grids where the processor gives them, no pixel values), and the "
           "returned cache as past_key_values.")
    if length < 0 or not all(type(layer) in (DynamicLayer, StaticLayer) for layer in past.layers):
        raise ValueError(f"PriorNormalized continues a conversation from a DynamicCache or StaticCache of "
                         f"full-attention layers (what generate returns), got {type(past).__name__}: {how}")
    if input_ids.shape[1] <= length:
        raise ValueError(f"past_key_values holds {length} tokens but input_ids only {input_ids.shape[1]}: {how}")
    if generation.normalizer.prior == "blank" or max(config.num_beams, config.num_return_sequences) > 1:
        raise ValueError("PriorNormalized continues a conversation from past_key_values with prior='masked' or "
                         "'text' and one sequence per prompt (num_beams=1, num_return_sequences=1); otherwise pass the "
                         "whole conversation as input_ids without past_key_values.")
    if architecture_for(model).bidirectional_prefix(None, input_ids) is not None:
        raise ValueError(f"PriorNormalized cannot continue a conversation from past_key_values on "
                         f"{architecture_for(model).name}: its first prompt attends to itself both ways (a prefix LM), "
                         "which the prior rows over the whole conversation cannot tell from the new text; pass the "
                         "whole conversation as a new prompt without past_key_values.")
    cache = PairedCache(config=model.config.get_text_config(decoder=True))
    for index, layer in enumerate(past.layers):
        cache.update(layer.keys[:, :, :length], layer.values[:, :, :length], index)
    mask = kwargs.get("attention_mask")
    whole = {**kwargs, "attention_mask": torch.ones_like(input_ids) if mask is None else mask}
    # first as a new prompt, so that what the model keeps from a prompt for its later steps (Qwen2-VL's rope deltas) is
    # this conversation's and not the last call's on the model; then as generate computes them, continuing the cache
    position_ids_for_generation(model, input_ids, {k: v for k, v in whole.items() if k != "past_key_values"})
    positions = position_ids_for_generation(model, input_ids, whole)
    mask = whole["attention_mask"]
    generation.conversation = (input_ids, mask, positions)
    return cache


def _refuse_unsupported(model, config, kwargs: dict, normalizer: PairedProcessor) -> None:
    """Raise before any work if this `generate` call asks for something the paired decoding cannot do exactly,
    naming the user's own setting and the fix."""
    named = refused_name(normalizer)
    plain = "use PriorNormalized(0) for plain decoding" if named == REFUSED_PRIOR else f"generate without {named}"

    def refuse(setting: str, why: str) -> None:
        raise ValueError(f"{named} does not support {setting}: {why} Remove it, or {plain}.")

    outside = "candidate tokens would be checked outside the paired forward, without the prior rows."
    audio = ("input_features", "audio_input_ids")  # Inkling's: quantized mel bins
    if kwargs.get("use_audio_in_video") or any(kwargs.get(key) is not None for key in audio):
        refuse("audio inputs (use_audio_in_video, input_features, audio_input_ids)", "pnd's prior hides the visual "
               "expansion only; audio interleaved with the video would still reach it.")
    if kwargs.get("assistant_model") is not None:
        refuse("generate(..., assistant_model=...)", outside)
    if kwargs.get("negative_prompt_ids") is not None:
        refuse("generate(..., negative_prompt_ids=...)", "it feeds transformers' classifier-free guidance, a second "
               "unconditional pass of its own that pnd's prior would be mixed with.")
    for name in ("prompt_lookup_num_tokens", "assistant_early_exit"):
        if getattr(config, name, None) is not None:
            refuse(f"{name}={getattr(config, name)!r}", outside)
    if kwargs.get("inputs_embeds") is not None:
        refuse("generate(..., inputs_embeds=...)", "embeddings do not say which positions hold the visual expansion "
               "that the prior masks out (and the prior's prefill runs on token ids). Pass the processor's input_ids "
               "and pixel values instead.")
    if config.prefill_chunk_size is not None:
        refuse(f"prefill_chunk_size={config.prefill_chunk_size!r}", "the prior's prefill needs the whole prompt in "
               "one call.")
    if config.use_cache is False:
        refuse("use_cache=False", "the prior rows live in generate's KV-cache.")
    if model.training and getattr(model, "is_gradient_checkpointing", False):
        refuse("gradient checkpointing in training mode", "transformers then runs the layers without the KV-cache "
               "that the prior rows live in; call model.eval() before generate (checkpointing acts in training only).")
    if config.cache_implementation not in (None, "dynamic", "static"):
        refuse(f"cache_implementation={config.cache_implementation!r} (from generate's arguments or the model's "
               "generation_config)", "the prior rows live in a dynamic KV-cache, or a static one "
               "(cache_implementation='static').")


def _check_visual_inputs(model, architecture, kwargs: dict) -> None:
    """Refuse non-finite pixel values, and a prompt with image/video tokens but no pixel inputs (the model would
    describe a visual input it never got), before any work."""
    check_pixels(kwargs, architecture.pixel_keys, "generate")
    prompt = kwargs.get("input_ids")
    given = any(kwargs.get(key) is not None for key in (*architecture.pixel_keys, "mm_encoder_outputs"))
    continued = kwargs.get("past_key_values") is not None  # a conversation goes on without its pixels (§4)
    if prompt is not None and not given and not continued and architecture.placeholder_mask(model.config, prompt).any():
        raise ValueError(f"The prompt holds image/video tokens but generate got none of "
                         f"{', '.join(architecture.pixel_keys)}: the model would describe a visual input it never got. "
                         "Pass the processor's outputs whole, "
                         "model.generate(**processor(text=..., videos=..., return_tensors='pt'), ...).")


def _generating_model(model, architecture):
    """The submodule whose `generate` the family's own `generate` runs (`Architecture.embeds_prompt`): its
    `language_model`, or the one its architecture names (Kosmos-2: `text_model`)."""
    return getattr(model, getattr(architecture, "generates_with", "language_model"))
