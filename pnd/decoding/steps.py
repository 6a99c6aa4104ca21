"""The forward side of a paired `generate` call: what the attached model's forward does with each of generate's calls.

`pnd.attach` (`pnd.decoding.paired`) makes the model's forward `paired_forward` (and, for a family whose `generate`
runs its language model's, that language model's forward `language_model_forward`). Within a paired `generate` call,
the first call is the prefill: the conditioned prompt, and the prior rows on its text tokens alone (in the same call
where `packed.py` can), into the `PairedCache`, whose rows a static cache's steps then get (`PairedStaticCache`).
Every later call is one decoding step on [conditioned rows; prior rows]: `generate` sees the conditioned logits, the
processor gets the prior logits (`Generation.record`). Any other call runs the model's own forward.

Example:
    >>> import pnd, torch
    >>> from pnd.testing import tiny_model, tiny_inputs
    >>> model, processor = tiny_model("llava_onevision")
    >>> inputs = tiny_inputs(processor, "llava_onevision")
    >>> plain = model(**inputs).logits
    >>> torch.equal(pnd.attach(model)(**inputs).logits, plain)  # outside a paired generate call: the model's own
    True
"""

from __future__ import annotations

import contextlib

import torch

from .._compat.cache_rows import layer_states
from .._compat.repairs import indexer_keys
from ..architectures.reported import EXPANSION_KEY
from ..attachment import Attachment, attachment_of
from ..interventions.engine import AttentionIntervention, intervening, reach
from ..interventions.steering import steering_prefill, steering_strength
from ..validation import check_conditioned_logits
from .cache import PairedCache, PairedStaticCache, SteeredStaticCache, additive_mask
from .contrast import contrast_prefill
from .generation import prior_terms, running_generation
from .packed import packed_prefill, packs_prior, sdpa_over_whole_context, use_split_attention
from .prior import blank_prefill, check_visual_rows, masked_prefill

_PER_ROW_INPUTS = ("input_ids", "inputs_embeds", "attention_mask", "token_type_ids", "mm_token_type_ids")
# a keyword of the attached forward: these are a static cache's decoding step's inputs of the conditioned rows, pair
# them (`paired_step`: no state of the call read, so that the model's compiled call traces the glue with the model)
PAIRED_STEP = "pnd_paired_step"
NEEDS_INPUT_IDS = "PriorNormalized needs generate(input_ids=...) from the model's processor, not inputs_embeds."
EMBEDDED_PROMPT = ("On a model whose generate runs its language model's generate (the Q-Former families: BLIP-2, "
                   "InstructBLIP, InstructBLIP-Video; Kosmos-2), pnd's processors take prior='masked' or 'text' on a "
                   "new prompt: not prior='blank', 'inputs' or 'noise' (VCD, ICD), nor ONLY's contrast rows (which "
                   "rerun the inputs through the whole model), nor past_key_values to continue. Use prior='masked' "
                   "(PriorNormalized, M3ID, PAI, VISTA) and pass the whole conversation as input_ids.")


def paired_forward(model, attachment: Attachment, *args, **kwargs):
    """The attached model's forward, on the model's inputs without what pnd added to them: a call on a paired cache
    within the model's paired `generate` call is a paired one (one marked `PAIRED_STEP`: a static cache's decoding
    step, `paired_step`); any other is the model's own forward."""
    kwargs.pop(EXPANSION_KEY, None)  # `model(**inputs)`: the model never sees what pnd added to the processor's outputs
    return _routed(model, attachment, attachment.forward, args, kwargs)


def language_model_forward(model, forward, *args, **kwargs):
    """`forward` of `model.language_model` (`attach` wraps it with this): for a family whose own generate runs its
    language model's generate on `inputs_embeds` (the Q-Former families, `pnd/architectures/qformer.py`), each call of
    it within an attached model's paired generate call is a paired one, as the attached model's forward would be.

    Example:
        >>> from pnd.testing import tiny_model
        >>> model, _ = tiny_model("instructblipvideo")
        >>> embeds = model.language_model.get_input_embeddings()(torch.tensor([[5, 6]]))
        >>> language_model_forward(model, model.language_model.forward, inputs_embeds=embeds).logits.shape[:2]  # plain
        torch.Size([1, 2])
    """
    return _routed(model, None, forward, args, kwargs)


def _routed(model, attachment: Attachment | None, forward, args: tuple, kwargs: dict):
    """`forward(*args, **kwargs)` as a paired step (marked `PAIRED_STEP`), a paired call (on a paired cache) or the
    model's own call (`attachment`: the model's, found where needed when None)."""
    cache = kwargs.get("past_key_values")
    if kwargs.pop(PAIRED_STEP, False):
        return paired_step(forward, cache.attention_mask, False, kwargs)
    if not isinstance(cache, (PairedCache, PairedStaticCache, SteeredStaticCache)):
        return forward(*args, **kwargs)  # no graph break where torch.compile traces a plain call
    return _paired_call(model, attachment or attachment_of(model), *args, forward=forward, **kwargs)


@torch.compiler.disable(recursive=False)  # torch.compile of the attached forward: this frame eager, the model compiled
def _paired_call(model, attachment: Attachment, *args, forward=None, **kwargs):
    """A paired call of `forward` (the attached model's own forward, or its language model's:
    `language_model_forward`)."""
    forward = forward or attachment.forward
    cache = kwargs["past_key_values"]
    generation = running_generation()
    if generation is None or generation.attachment is not attachment:
        return forward(*args, **kwargs)
    if args:
        raise TypeError("pnd's paired forward takes keyword arguments only (as generate passes them).")
    step_positions = getattr(attachment.architecture, "step_positions", None)
    if kwargs.get("position_ids") is None and step_positions is not None:  # Kosmos-2(.5): its generate passes none
        ids = kwargs["input_ids"]
        mask = _mask_so_far(cache, kwargs.get("attention_mask"), ids)
        kwargs["position_ids"] = step_positions(model, mask, ids.shape[1])
    if isinstance(cache, PairedStaticCache) and not cache.is_paired:
        return _static_prefill(model, attachment, generation, cache, kwargs, forward)
    if generation.steering is not None and not cache.is_paired:  # VISTA after its prefill: no prior rows
        return _steered_step(generation, kwargs, forward)
    if not cache.is_paired:
        return _prefill(model, attachment, generation, cache, kwargs, forward)
    return _decode_step(generation, cache, kwargs, forward)


def _mask_so_far(cache, attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    """The 2D attention mask of the conditioned rows up to this call's last token: generate's own, or, where generate
    passes a 4D one (a static cache's decoding steps), the paired static cache's."""
    if attention_mask is not None and attention_mask.ndim == 2:
        return attention_mask
    length = int(cache.get_seq_length()) + input_ids.shape[1]
    if isinstance(cache, PairedStaticCache) and cache.is_paired:
        return cache.attention_mask[: input_ids.shape[0], :length]
    return input_ids.new_ones(input_ids.shape[0], length)


def _prompt_ids(generation, kwargs: dict) -> tuple[torch.Tensor, bool]:
    """The prefill's token ids, and whether its forward gets them as `inputs_embeds` (the Q-Former families: the ids
    are then the generate call's, repeated as generate repeats its rows for beams and returned sequences)."""
    input_ids, embeds = kwargs.get("input_ids"), kwargs.get("inputs_embeds")
    if input_ids is not None or embeds is None or generation.input_ids is None:
        if input_ids is None:
            raise ValueError(NEEDS_INPUT_IDS)
        return input_ids, False
    prompt = generation.input_ids.to(embeds.device)
    if embeds.shape[0] % prompt.shape[0] or embeds.shape[1] != prompt.shape[1]:
        raise ValueError(f"pnd: the language model's first forward got inputs_embeds of shape "
                         f"{tuple(embeds.shape[:2])} for a prompt of {tuple(prompt.shape)} token ids; this model is "
                         "not supported.")
    return prompt.repeat_interleave(embeds.shape[0] // prompt.shape[0], dim=0), True


def _prefill(model, attachment, generation, cache, kwargs, forward):
    """The conditioned prompt and the prior rows on its text tokens alone (one call when packable), one cache.
    VISTA's prior rows serve its prefill only: the cache keeps none of them."""
    input_ids, embedded = _prompt_ids(generation, kwargs)
    if embedded and (generation.contrast, generation.conversation, generation.blank_outputs) != (None, None, None):
        raise ValueError(EMBEDDED_PROMPT)
    if kwargs.get("position_ids") is None:
        raise ValueError("pnd: generate passed no position_ids to the first forward; this model is not supported.")
    mode = generation.normalizer.prior
    _reach_interventions(model, generation, input_ids)
    generation.whole_masks = sdpa_over_whole_context(model)
    conditioned = _conditioned(generation, forward)
    steering = steering_strength(generation.normalizer.interventions)
    packs = attachment.prefill == "auto" and not attachment.architecture.embeds_prompt and packs_prior(model, kwargs)
    if steering is not None:  # VISTA: its vectors first, from an unsteered pass and the prior rows
        outputs, prior = steering_prefill(model, generation, conditioned, kwargs, input_ids, steering,
                                          packed_prefill if packs else None)
    elif generation.contrast is not None:  # first: the conditioned call then sets what the model keeps (rope deltas)
        visual = generation.reached and _placeholders(model, generation, generation.contrast["input_ids"])
        with intervening(generation.reached, visual, contrast=slice(None)):
            prior = contrast_prefill(model, forward, generation.contrast, kwargs)
        outputs = conditioned(**kwargs)
    elif generation.conversation is not None:  # the new text on the returned cache; the prior over the conversation
        outputs = conditioned(**kwargs)
        prior = masked_prefill(model, *generation.conversation, mode, layer_states(cache))
    elif generation.blank_outputs is not None:
        outputs = forward(**kwargs)
        prior = blank_prefill(model, forward, kwargs, generation.blank_outputs)
    elif packs:  # PAI's attention acts on the packed call's prompt part (the conditioned rows)
        outputs, prior = packed_prefill(model, conditioned, kwargs, mode)
    else:
        outputs = conditioned(**kwargs)
        reuse = attachment.prefill != "own_call_no_reuse"
        shared = layer_states(cache) if reuse else None
        prior = masked_prefill(model, input_ids, kwargs.get("attention_mask"), kwargs["position_ids"], mode,
                               shared, inputs=kwargs)
    if generation.steering is None:
        cache.add_prior(prior)
    logits = outputs.logits[:, -1]
    generation.record(torch.cat([logits, prior.logits.to(logits)]), logits.shape[0])
    # last: its host sync then waits on the work above already queued, not before it (the cache is pnd's own, and
    # generate returns nothing of a refused pass)
    check_conditioned_logits(logits, "generate")
    return outputs


def _steered_step(generation, kwargs: dict, forward):
    """A decoding step of VISTA: the conditioned rows alone, each layer's output steered. On its static cache, which
    generate does not compile and so gives no mask where the prompt is unpadded, the mask of the slots written so far
    (without one, SDPA's one-token step attends to every slot of the cache, the unwritten ones too): over all its slots,
    from the cache's count on the device, which the host never reads."""
    cache, ids = kwargs["past_key_values"], kwargs["input_ids"]
    if kwargs.get("attention_mask") is None and isinstance(cache, SteeredStaticCache):
        slots = torch.arange(cache.get_max_length(), device=ids.device)
        kwargs["attention_mask"] = (slots < cache.get_seq_length() + ids.shape[1]).expand(ids.shape[0], -1).long()
    outputs = _conditioned(generation, forward)(**kwargs)
    generation.record(outputs.logits[:, -1], outputs.logits.shape[0])
    return outputs


def _reach_interventions(model, generation, input_ids: torch.Tensor) -> None:
    """Find the attention the processor's interventions act in (`pnd.interventions.reach`), and the prompt's
    placeholder slots they read, once per generate call; refuse what they cannot act on."""
    if not generation.normalizer.interventions:
        return
    if generation.conversation is not None:
        raise ValueError(f"{type(generation.normalizer).__name__} does not continue a conversation from "
                         "past_key_values: pass the whole conversation as input_ids, without past_key_values.")
    use_split_attention(model, always=True)
    generation.reached = reach(model, [i for i in generation.normalizer.interventions
                                       if isinstance(i, AttentionIntervention)])
    generation.visual = _placeholders(model, generation, input_ids)
    if generation.reached:  # PAI and ONLY act on the visual slots' attention (VISTA's priors check their own)
        check_visual_rows(generation.visual)


def _placeholders(model, generation, input_ids: torch.Tensor) -> torch.Tensor:
    """The slots of `input_ids` that hold visual placeholder tokens (the registry's), where interventions act."""
    return generation.attachment.architecture.placeholder_mask(model.config, input_ids)


def _conditioned(generation, forward):
    """`forward`, run with the interventions that act on the conditioned rows (all of this call's rows): the attention
    they reach, and VISTA's steering once its vectors are set."""
    if not generation.normalizer.interventions:
        return forward

    def conditioned(**kwargs):
        with intervening(generation.reached, generation.visual, steering=generation.steering, conditioned=slice(None)):
            return forward(**kwargs)
    return conditioned


def _static_prefill(model, attachment, generation, cache: PairedStaticCache, kwargs, forward):
    """The prefill into a `PairedCache`, whose rows are then copied into the fixed-length cache of the decoding
    steps."""
    prefill = PairedCache(config=model.config.get_text_config(decoder=True))
    outputs = _prefill(model, attachment, generation, prefill, {**kwargs, "past_key_values": prefill}, forward)
    mask = kwargs.get("attention_mask")
    cache.pair(prefill, torch.ones_like(_prompt_ids(generation, kwargs)[0]) if mask is None else mask)
    cache.own_step_masks = generation.whole_masks  # an SDPA model: pnd builds each step's mask, generate none
    outputs.past_key_values = cache
    if getattr(outputs, "attentions", None) is not None:  # as a static-cache prefill returns them: a key per cache
        keys = cache.get_max_length()  # slot, those after the prompt masked out (weight 0)
        outputs.attentions = tuple(torch.nn.functional.pad(a, (0, keys - a.shape[-1])) for a in outputs.attentions)
    return outputs


def _paired_mask(cache, cond_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    """The 2D attention mask of a decoding step, [conditioned rows; prior rows]."""
    if isinstance(cache, PairedStaticCache):  # fixed for the whole call (the step's own: `PairedStaticCache.step_mask`)
        return cache.attention_mask
    n, step = input_ids.shape
    prompt = cache.prior_attends  # the prior rows' prompt slots (a contrast prompt has a mask of its own)
    if cond_mask is None:  # generate passes none where every slot is attended
        cond_mask = torch.ones(n, cache.get_seq_length() + step, dtype=torch.long, device=input_ids.device)
        prior_mask = torch.nn.functional.pad(prompt.long(), (0, cond_mask.shape[1] - prompt.shape[1]), value=1)
    else:
        prior_mask = torch.cat([prompt.to(cond_mask.dtype), cond_mask[:, prompt.shape[1]:]], 1)
    return torch.cat([cond_mask, prior_mask])


def _decode_step(generation, cache, kwargs, forward):
    """One forward call on [conditioned rows; prior rows] (`paired_step`, inside the model's compiled call where
    generate compiles its steps); generate only sees the conditioned logits."""
    if generation.decode_forward is not None:  # the model's compiled call: the step's glue traced with the model
        if cache.own_step_masks:  # generate's 2D mask, one slot longer each step: the compiled step builds its own
            kwargs.pop("attention_mask", None)
        outputs, *terms = generation.decode_forward(**kwargs)  # (a static cache: no indexed layer)
    else:
        mask = _paired_mask(cache, kwargs.get("attention_mask"), kwargs["input_ids"])
        with indexer_keys(mask), _step_interventions(generation, kwargs["input_ids"].shape[0], mask.shape[-1]):
            outputs, *terms = paired_step(forward, mask, generation.whole_masks, kwargs)
    generation.pending.append(tuple(terms))
    return outputs


def _step_interventions(generation, n: int, length: int):
    """The context of a paired step of `n` conditioned and `n` prior rows (`length` slots after it: a static cache's,
    all of them) in which the processor's interventions act on their rows; a null context where it has none."""
    if not generation.normalizer.interventions:
        return contextlib.nullcontext()
    visual = torch.cat([generation.visual, generation.visual])
    return intervening(generation.reached, visual, length, generation.steering, conditioned=slice(0, n),
                       contrast=slice(n, 2 * n))


def paired_step(forward, mask: torch.Tensor, whole_masks: bool, kwargs: dict):
    """`forward` on [conditioned rows; prior rows], from generate's inputs `kwargs` of the conditioned rows and the
    step's paired 2D attention mask: (the outputs of the conditioned rows, log Z, the prior's log-probabilities)
    (`prior_terms`). `whole_masks`: a dynamic cache's step of one new token gives the model its 4D mask."""
    input_ids = kwargs["input_ids"]
    n = input_ids.shape[0]
    paired = dict(kwargs)
    for key in _PER_ROW_INPUTS:
        if kwargs.get(key) is not None and key != "attention_mask":
            paired[key] = torch.cat([kwargs[key], kwargs[key]])
    cache = kwargs["past_key_values"]
    paired["attention_mask"] = mask  # the model builds the 4D mask, except where pnd gives it (no work in the model):
    if isinstance(cache, PairedStaticCache):  # pnd's own 4D mask, or generate's of the conditioned rows extended
        paired["attention_mask"] = cache.step_mask(kwargs.get("attention_mask"))
    elif whole_masks and input_ids.shape[1] == 1:  # one new token: it sees every slot its row attends
        paired["attention_mask"] = additive_mask(mask.bool()[:, None, None, :], cache.layers[0].keys.dtype)
    positions = kwargs["position_ids"]
    batch_dim = 0 if positions.ndim == 2 else 1
    prior_positions = positions - cache.prior_position_offset.unsqueeze(-1)
    paired["position_ids"] = torch.cat([positions, prior_positions], dim=batch_dim)
    outputs = forward(**paired)
    logits = outputs.logits
    outputs.logits = logits[:n]
    for name in ("attentions", "hidden_states"):  # what the user sees describes the conditioned rows only
        if getattr(outputs, name, None) is not None:
            setattr(outputs, name, tuple(states[:n] for states in getattr(outputs, name)))
    return outputs, *prior_terms(logits[:, -1], n)

