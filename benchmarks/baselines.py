"""Peers of pnd's decoding: the naive recompute of the prior (and the check of pnd's greedy tokens against it),
mitigv's methods (the packaged peer) and ICD's contrast prompt."""

from __future__ import annotations

import torch
from timing import generate
from transformers import LogitsProcessor

import pnd
from pnd.architectures.layers import layer_plan
from pnd.decoding.prior import default_position_ids

ALPHA = 0.5  # the prior's weight in pnd's runs and the naive recompute


class NaivePrior(LogitsProcessor):
    """The masked prior recomputed from scratch at every step (no cache): the brute-force way. With layers that must
    see the kept tokens only (recurrent, indexed: `pnd/architectures/layers.py`), a call on the kept tokens alone at their
    positions."""

    def __init__(self, model, inputs):
        self.model, self.inputs = model, inputs
        self.visual = pnd.architectures.architecture_for(model).expansion(model, inputs["input_ids"],
                                                                          inputs["attention_mask"])
        self.kept_only = layer_plan(model.config.get_text_config(decoder=True)).kept_only

    @torch.no_grad()
    def __call__(self, input_ids, scores):
        prompt_len = self.visual.shape[1]
        grown = {k: torch.cat([v, v.new_zeros(v.shape[0], input_ids.shape[1] - prompt_len)], 1)
                 for k, v in self.inputs.items() if k in ("attention_mask", "mm_token_type_ids")}
        grown["attention_mask"][:, prompt_len:] = 1
        extra = {k: v for k, v in self.inputs.items() if k not in ("input_ids", "attention_mask", "mm_token_type_ids")}
        positions = default_position_ids(self.model, input_ids, **grown, **extra)
        mask = grown["attention_mask"].clone()
        mask[:, :prompt_len] *= ~self.visual
        if self.kept_only:  # the kept tokens hold no placeholder: no pixels
            input_ids, mask, positions = _kept_tokens(input_ids, mask.bool(), positions)
            extra = {}
        prior = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False,
                           **extra).logits[:, -1]
        return torch.log_softmax(scores.float(), -1) - ALPHA * torch.log_softmax(prior.float(), -1)


def _kept_tokens(input_ids, kept, positions):
    """Each row's `kept` tokens alone, left-padded, with their attention mask and position ids ((rows,) batch, L)."""
    width = int(kept.sum(1).max())
    ids, mask = input_ids.new_zeros(input_ids.shape[0], width), kept.new_zeros(kept.shape[0], width, dtype=torch.long)
    compact = positions.new_zeros(*positions.shape[:-1], width)
    for row, keep in enumerate(kept):
        n = int(keep.sum())
        ids[row, width - n:], mask[row, width - n:] = input_ids[row, keep], 1
        compact[..., row, width - n:] = positions[..., row, keep]
    return ids, mask, compact


def check_tokens(model, inputs, tokens: int, **kwargs) -> str:
    """pnd's greedy tokens (`generate` with `kwargs`) against the naive recompute's, as a sentence for the report.

    In float32 they must be equal: a difference raises AssertionError, which stops the benchmark. In bf16 or fp16,
    rounding alone can flip a near-tie of a random model's flat logits, so a difference is reported, beside the floor:
    plain `generate`'s greedy tokens (with `kwargs`) against a plain recompute without a cache, bf16's own noise.
    """
    ours = generate(model, inputs, [pnd.PriorNormalized(ALPHA)], tokens, do_sample=False, **kwargs)
    naive = generate(model, inputs, [NaivePrior(model, inputs)], tokens, do_sample=False)
    setting = (f"{tokens} tokens, batch {len(ours)}, {kwargs.get('cache_implementation', 'dynamic')} cache"
               + (", compiled" if "compile_config" in kwargs else ""))
    if model.dtype == torch.float32:
        if not torch.equal(ours, naive):
            raise AssertionError(f"pnd's greedy tokens ({kwargs or 'default cache'}) differ from the naive recompute path")
        sentence = f"Greedy tokens of pnd == the naive recompute's ({setting}): checked in the run."
    else:
        plain = generate(model, inputs, [], tokens, do_sample=False, **kwargs)
        recomputed = generate(model, inputs, [], tokens, do_sample=False, use_cache=False)
        prompt = inputs["input_ids"].shape[1]
        sentence = (f"Greedy tokens in {str(model.dtype).removeprefix('torch.')} ({setting}) equal before the first "
                    f"difference: pnd against the naive recompute {agreement(ours, naive, prompt)}, plain against a "
                    f"plain recompute without cache (the floor) {agreement(plain, recomputed, prompt)}.")
    print(sentence, flush=True)
    return sentence


def agreement(ids, other, prompt: int) -> str:
    """How many generated tokens of `ids` equal `other`'s before each row's first difference, of how many.

    Example:
        >>> agreement(torch.tensor([[7, 1, 2, 3], [7, 1, 2, 3]]), torch.tensor([[7, 1, 9, 3], [7, 1, 2, 3]]), prompt=1)
        '4/6 (0.67)'
    """
    same = int((ids[:, prompt:] == other[:, prompt:]).long().cumprod(1).sum())
    total = ids[:, prompt:].numel()
    return f"{same}/{total} ({same / total:.2f})"


MITIGV = {  # mitigv's settings for pnd's method at the paper's defaults (docs/methods.md, "pnd and mitigv")
    "vcd": dict(alpha=1.0, beta=0.1, seed=0),  # seed 0: the noise of pnd's seed 0
    "icd": dict(lam=0.5, alpha=0.1),  # l_std - lam * l_dst ranks as (1 + a) l_std - a l_dst at lam = a / (1 + a)
    "m3id": dict(alpha=0.3, forgetting_rate=0.02),
    "pai": dict(alpha=0.2, gamma=1.1, beta=0.1, start_layer=2, end_layer=32),
    "only": dict(layer=0, alpha1=3.0, alpha2=1.0, gamma=0.2),
    "vista": dict(steer_strength=0.01),
}
TEXT_ONLY = ("m3id", "pai", "vista")  # mitigv's methods whose second prompt is the text without the image


def mitigv_vcd(model, inputs):
    """A callable running mitigv's VCD for n tokens on `inputs`, or None where mitigv cannot run."""
    return mitigv_method(model, inputs, "vcd")


def mitigv_method(model, inputs, name: str, unconditional=None, contrast=None, **settings):
    """A callable running mitigv's `name` for n tokens on `inputs` (its text-only prompt `unconditional`: M3ID's, PAI's,
    VISTA's; its contrast inputs `contrast`, ICD's), with `settings` over `MITIGV`'s, or None where mitigv cannot run.
    The callable returns the generated ids."""
    if model.config.model_type != "llava_onevision":
        return None  # mitigv supports the LLaVA and Qwen2.5-VL families
    try:
        from mitigv import build_mitigator
        from mitigv.backends.llava import LlavaModelAdapter
    except ImportError:
        return None

    class FixedInputs:
        """mitigv's processor protocol, handing it the benchmark's prepared inputs."""

        def prepare_inputs(self, prompt, images):
            if prompt and contrast is not None:  # ICD's disturbed prompt (the prompt "" with its prefix)
                return dict(contrast)
            if images is None and unconditional is not None:  # M3ID's prompt without the image
                return {"input_ids": unconditional, "attention_mask": torch.ones_like(unconditional)}
            return dict(inputs)

        def batch_decode(self, ids, **kwargs):
            return [""] * len(ids)

    class Adapter(LlavaModelAdapter):
        """mitigv 0.1.7's LLaVA adapter with the language model where its PAI, ONLY and VISTA look for the decoder
        layers (transformers 5 keeps it at model.model.language_model)."""

        @property
        def language_model(self):
            return self.model.model.language_model

    mitigator = build_mitigator(name, Adapter(model), FixedInputs(), do_sample=False,
                                **{**MITIGV.get(name, MITIGV["vcd"]), **settings})
    mitigator._decode = lambda ids: ids  # the token ids, not text
    if name in ("pai", "only"):  # mitigv finds the image tokens' span; the benchmark's prompt holds a video's
        video = (inputs["input_ids"] == model.config.video_token_index).nonzero()[:, 1]
        spans = torch.tensor([[int(video.min()), int(video.max()) + 1]])
        mitigator._locate_image_spans = mitigator._image_token_spans = lambda *args: spans

    def run(tokens, clock):
        def sample_next(logits, cfg):  # called once per step, after both of the method's forwards
            clock(None, logits)
            return type(mitigator)._sample_next(mitigator, logits, cfg)
        mitigator._sample_next = sample_next
        return mitigator.generate("the video", "", max_new_tokens=tokens)  # images: any value but None (M3ID's)
    return run


def icd_contrast(inputs, tokens: int = 20, seed: int = 1) -> dict:
    """ICD's contrast inputs for a 1-row video prompt: `tokens` random "instruction" tokens inserted after the video
    (before the question: the prompt's last 24 tokens), the pixels the same."""
    ids = inputs["input_ids"]
    instruction = torch.randint(10, 1000, (1, tokens), generator=torch.Generator().manual_seed(seed)).to(ids)
    at = ids.shape[1] - 24
    fill = {"input_ids": instruction, "attention_mask": torch.ones_like(instruction)}
    return {k: torch.cat([v[:, :at], fill.get(k, torch.zeros_like(instruction)).to(v), v[:, at:]], 1)
            if v.shape == ids.shape else v for k, v in inputs.items()}
