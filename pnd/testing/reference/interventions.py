"""The brute-force reference of the methods that intervene inside the language model (issue 45): PAI, ONLY, VISTA.

Every step is a full forward from scratch without any cache (as `full_logits` makes it), the intervention applied by
hand: on a copy of the model whose language model runs transformers' eager attention, the scores edited before and
the weights after its softmax (`eager_attention`), forward hooks on its decoder layers for VISTA. Written from the
papers and mitigv's definitions (mitigv/algorithms/pai.py, only.py, vista.py), not from pnd.

Queries are indexed in the whole sequence (prompt of length L, then the generated tokens): the queries at L - 1 and
after are those that cached decoding once computed as the newest token; the visual slots are `placeholder_positions` of
the prompt (False for generated tokens); a query's visible keys are those its attention mask lets it see.

Example (on a tiny model, a few seconds):
    from pnd.testing import tiny_inputs, tiny_model
    from pnd.testing.reference import method_greedy, pai_combine, pai_conditioned, text_prior
    model, processor = tiny_model("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision")
    tokens, scores = method_greedy(model, inputs, 2, pai_combine(gamma=1.1, beta=0.1), text_prior,
                                   conditioned=pai_conditioned(alpha=0.5, start_layer=0, end_layer=32))
"""

import contextlib
import copy
import itertools
import math

import torch
from torch.overrides import TorchFunctionMode

from ...attachment import attachment_of
from .expansion import placeholder_positions
from .forwards import full_logits, kept_tokens_forward
from .scores import text_only_tokens

SOFTMAX = (torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax, torch.special.softmax)


def attention_of(layer):
    """A decoder layer's softmax attention: its one child module whose class is an attention (`self_attn` in most
    families, the `mixer` of Nemotron-H's attention blocks); None in a layer without one (a convolution, a recurrent
    mixer, an MLP or MoE block) or with two (a Q-Former's self- and cross-attention)."""
    found = [m for m in layer.children() if type(m).__name__.endswith("Attention")]
    return found[0] if len(found) == 1 else None


def decoder_layers(model):
    """(the module that owns them, the ModuleList of the language model's decoder layers): the list whose layers'
    attention (`attention_of`) is built on the text config (else the one under a `language_model`)."""
    config = model.config.get_text_config(decoder=True)
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.ModuleList)
             and any(attention_of(layer) is not None for layer in m)]
    found = [(n, m) for n, m in lists if any(getattr(attention_of(layer), "config", None) is config for layer in m)]
    found = found or [(n, m) for n, m in lists if "language_model" in n]
    assert len(found) == 1, f"no single decoder-layer list in {type(model).__name__}: {[n for n, _ in found]}"
    name, layers = found[0]
    return model.get_submodule(name.rpartition(".")[0]), layers


class _SoftmaxEdits(TorchFunctionMode):
    """Inside decoder layer `layer`'s attention (None elsewhere), its one softmax: `before` edits the scores (mask
    added), `after` the weights (fp32, as eager's softmax returns them)."""

    def __init__(self, before, after):
        super().__init__()
        self.before, self.after, self.layer, self.calls = before, after, None, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.layer is None or func not in SOFTMAX:
            return func(*args, **kwargs)
        self.calls += 1
        scores, *rest = args
        assert scores.ndim == 4, scores.shape  # (batch, heads, queries, keys)
        visible = (scores > torch.finfo(scores.dtype).min / 2)[:, :1]  # masked: the dtype's minimum added
        if self.before is not None:
            scores = self.before(self.layer, scores, visible)
        weights = func(scores, *rest, **kwargs)
        return weights if self.after is None else self.after(self.layer, weights, visible)


def eager_copy(model):
    """A copy of `model` that shares its weights, buffers and pnd attachment, its language model on eager attention
    (transformers' eager: q kᵀ scaling + additive mask, softmax in fp32, @ v); the model itself is left as it is."""
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    attachment = attachment_of(model)
    shared[id(attachment)] = attachment
    clone = copy.deepcopy(model, shared)
    text = clone.config.get_text_config(decoder=True)
    keys = [k for k in clone.config.sub_configs if getattr(clone.config, k, None) is text]
    clone.set_attn_implementation({keys[0]: "eager"} if keys else "eager")  # the text config alone where it is one
    return clone


@contextlib.contextmanager
def eager_attention(model, before=None, after=None):
    """Yields `eager_copy(model)` with the attention of each decoder layer edited: `before(layer, scores, visible)`
    edits the pre-softmax scores (batch, heads, queries, keys), mask added; `after(layer, weights, visible)` the
    post-softmax weights; `visible` (batch, 1, queries, keys): the keys the mask lets each query see."""
    clone = eager_copy(model)
    edits = _SoftmaxEdits(before, after)

    def leave(index, output):
        assert edits.calls == 1 or output is None, f"layer {index}: {edits.calls} softmax calls in its attention"
        edits.layer, edits.calls = None, 0

    hooks = []
    for index, layer in enumerate(decoder_layers(clone)[1]):
        attention = attention_of(layer)
        if attention is not None:
            assert getattr(attention, "layer_idx", index) == index, (attention.layer_idx, index)
            hooks += [attention.register_forward_pre_hook(lambda m, a, i=index: setattr(edits, "layer", i)),
                      attention.register_forward_hook(lambda m, a, out, i=index: leave(i, out), always_call=True)]
    try:
        with edits:
            yield clone
    finally:
        for hook in hooks:
            hook.remove()


def visual_slots(model, inputs, length):
    """(batch, length) bool: the prompt's visual placeholder tokens (the image/video token ids, not the delimiters
    around them: the span mitigv finds), False for the generated tokens. Kosmos-2 and 2.5, whose config names no image
    token (their latent queries are ordinary vocabulary ids): the slots the processor marks for the image's features,
    `image_embeds_position_mask` == 1, where the text model writes them (Kosmos-2.5's marks `<image>`, `</image>` -1;
    its processor writes one mask for the whole batch, as if no row were padded: right for unpadded prompts only)."""
    marked = inputs.get("image_embeds_position_mask")
    visual = placeholder_positions(model, inputs["input_ids"]) if marked is None else marked == 1
    return torch.cat([visual, visual.new_zeros(visual.shape[0], length - visual.shape[1])], 1)


# --- PAI (Liu et al., ECCV 2024) ---


def pai_amplify(scores, visible, visual, prompt_length, alpha):
    """PAI's edit of pre-softmax scores (batch, heads, S, S): A + alpha |A| at each query p >= L - 1's visible visual
    keys (`visual` (batch, S))."""
    target = visible & visual[:, None, None, :]
    target[:, :, : prompt_length - 1] = False
    return torch.where(target, scores + alpha * scores.abs(), scores)


def pai_conditioned(alpha, start_layer, end_layer):
    """PAI's conditioned logits (model, inputs, sequence) -> (batch, vocab) fp32: the conditioned from-scratch forward
    with `pai_amplify` in decoder layers [start_layer, min(end_layer, layers))."""
    def conditioned(model, inputs, sequence):
        visual = visual_slots(model, inputs, sequence.shape[1])

        def before(layer, scores, visible):
            assert scores.shape[-2] == sequence.shape[1], "the language model runs on another sequence"
            if not start_layer <= layer < end_layer:
                return scores
            return pai_amplify(scores, visible, visual, inputs["input_ids"].shape[1], alpha)

        with eager_attention(model, before=before) as edited:
            return full_logits(edited, inputs, sequence, prior=False)
    return conditioned


def pai_combine(gamma, beta):
    """PAI's combination of log-probabilities (prior: `text_prior`): gamma (c - t) + t, where gamma != 1 and beta > 0
    -inf for tokens whose conditioned probability is below beta times the largest (mitigv: c alone at gamma = 1)."""
    def combine(c, p, step):
        if gamma == 1:
            return c
        s = gamma * (c - p) + p
        if beta > 0:
            s = s.masked_fill(c < math.log(beta) + c.amax(-1, keepdim=True), -math.inf)
        return s
    return combine


# --- ONLY (Wan et al., ICCV 2025) ---


def sink_suppressed_entropy(a):
    """Entropy over the last dim after ONLY's sink suppression: entries above mean + std (biased) set to 0, the rest
    renormalized."""
    mean = a.mean(-1, keepdim=True)
    threshold = mean + (a - mean).square().mean(-1, keepdim=True).sqrt()  # the biased std; nan on no keys, unwarned
    filtered = torch.where(a > threshold, torch.zeros_like(a), a)
    p = filtered / filtered.sum(-1, keepdim=True).clamp_min(1e-12)
    return -(p * p.clamp_min(1e-12).log()).sum(-1)


def deactivated_heads(weights, visual_keys, text_keys):
    """ONLY's head selection for one query: weights (heads, keys) post-softmax, two bool (keys,) sets; True where
    TVER = entropy(text) / entropy(visual) is below the heads' mean."""
    w = weights.float()
    tver = sink_suppressed_entropy(w[:, text_keys]) / sink_suppressed_entropy(w[:, visual_keys]).clamp_min(1e-12)
    tver = torch.nan_to_num(tver, nan=0.0, posinf=0.0, neginf=0.0)
    return tver < tver.mean()


def only_deactivate(weights, visible, visual, prompt_length):
    """ONLY's edit of post-softmax weights (batch, heads, S, S): each query p's deactivated heads (selected from query
    max(p, L - 1)'s weights over its visible keys, in fp32 as eager's softmax returns them) get weights 0."""
    batch, heads, length, _ = weights.shape
    assert visible.shape[1] == 1
    off = torch.zeros(batch, heads, length, dtype=torch.bool, device=weights.device)
    for row in range(batch):
        for query in range(prompt_length - 1, length):
            seen = visible[row, 0, query]
            off[row, :, query] = deactivated_heads(weights[row, :, query], seen & visual[row], seen & ~visual[row])
    off[:, :, : prompt_length - 1] = off[:, :, prompt_length - 1 : prompt_length]
    return weights.masked_fill(off[..., None], 0.0)


def only_contrast(layer):
    """ONLY's textually enhanced logits, as a prior function (model, inputs, sequence) -> (batch, vocab): the
    conditioned from-scratch forward (pixels included) with `only_deactivate` at decoder layer `layer`."""
    def prior(model, inputs, sequence):
        visual = visual_slots(model, inputs, sequence.shape[1])

        def after(index, weights, visible):
            assert weights.shape[-2] == sequence.shape[1], "the language model runs on another sequence"
            return only_deactivate(weights, visible, visual, inputs["input_ids"].shape[1]) if index == layer else weights

        with eager_attention(model, after=after) as edited:
            return full_logits(edited, inputs, sequence, prior=False)
    return prior


def only_combine(alpha1, alpha2, gamma):
    """ONLY's combination of log-probabilities f (conditioned), g (`only_contrast`): d = sum |exp f - exp g|;
    f + alpha1 g where d < gamma, else (1 + alpha2) f - alpha2 g."""
    def combine(f, g, step):
        d = (f.exp() - g.exp()).abs().sum(-1, keepdim=True)
        return torch.where(d < gamma, f + alpha1 * g, (1 + alpha2) * f - alpha2 * g)
    return combine


# --- VISTA (Li & Shi, ICML 2025; its visual steering vectors) ---


@contextlib.contextmanager
def _hidden_states(owner):
    """Collects `owner`'s output_hidden_states (it is called with output_hidden_states=True) into a list."""
    captured = []
    pre = owner.register_forward_pre_hook(lambda m, a, kw: (a, {**kw, "output_hidden_states": True}), with_kwargs=True)
    post = owner.register_forward_hook(lambda m, a, out: captured.append(out.hidden_states))
    try:
        yield captured
    finally:
        pre.remove()
        post.remove()


def steering_vectors(model, inputs, prior="text"):
    """VISTA's vectors, one per decoder layer l: H_p[l + 1][:, last slot] - H_n[l + 1][:, last kept slot], H_p the
    hidden states of the plain conditioned forward of the prompt, H_n those of the text-only prompt (the visual
    expansion cut out, the kept tokens alone at 0, 1, 2, ...; `prior="masked"`: the prompt with its expansion masked
    out of attention, positions kept). The last entry is after the final norm (as mitigv)."""
    owner, layers = decoder_layers(model)
    prompt = inputs["input_ids"]
    with torch.no_grad(), _hidden_states(owner) as captured:
        full_logits(model, inputs, prompt, prior=False)
        if prior == "masked":
            full_logits(model, inputs, prompt, prior=True)
    positive = captured[0]
    if prior == "masked":
        negative = captured[1]
    else:
        kept, positions = text_only_tokens(model, inputs, prompt)
        with torch.no_grad():
            negative = kept_tokens_forward(model, prompt, kept, positions, output_hidden_states=True)[0].hidden_states
    assert len(positive) == len(negative) == len(layers) + 1
    return [positive[layer + 1][:, -1] - negative[layer + 1][:, -1] for layer in range(len(layers))]


def _steer(output, add):
    """A decoder layer's output (a tensor, or a tuple led by one) + `add`."""
    if isinstance(output, tuple):
        return (output[0] + add.to(output[0].dtype), *output[1:])
    return output + add.to(output.dtype)


def vista_conditioned(steer_strength, prior="text"):
    """VISTA's conditioned logits (model, inputs, sequence) -> (batch, vocab) fp32: the conditioned from-scratch
    forward with each decoder layer l's output (every position) + steer_strength * `steering_vectors`[l] (of `prior`,
    "text" or "masked"). Its score is
    log_softmax of these alone: combine with `lambda c, p, step: c` (and prior=None)."""
    def conditioned(model, inputs, sequence):
        vectors = steering_vectors(model, inputs, prior)
        hooks = [layer.register_forward_hook(lambda m, a, out, add=steer_strength * v[:, None]: _steer(out, add))
                 for layer, v in zip(decoder_layers(model)[1], vectors)]
        try:
            return full_logits(model, inputs, sequence, prior=False)
        finally:
            for hook in hooks:
                hook.remove()
    return conditioned
