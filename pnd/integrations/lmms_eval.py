"""lmms-eval models `pnd_llava_ov`, `pnd_qwen2_vl` and `pnd_hf`: prior-normalized decoding and scoring.

pnd registers them in lmms-eval's entry-point group `lmms_eval.models` (`pnd.integrations.manifests`), so once
pnd is installed they work like lmms-eval's own models, with no fork:

    lmms-eval --model pnd_llava_ov --tasks mme --batch_size 1 --output_path logs/ \\
        --model_args pretrained=llava-hf/llava-onevision-qwen2-7b-ov-hf,alpha=0.5,max_frames_num=32
    lmms-eval --model pnd_hf ... --model_args pretrained=...,method=vcd,noise_step=500     # docs/methods.md

`generate_until` decodes with the method's logits processor (`pnd.PriorNormalized` by default); `loglikelihood`
scores each continuation with the method's own score (`PndHf.loglikelihood`) and returns lmms-eval's loss convention.

Example:
    >>> from lmms_eval.models import get_model
    >>> get_model("pnd_llava_ov").__name__
    'PndLlavaOnevision'
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from tqdm.auto import tqdm
from transformers import AutoConfig

from .._compat.cache_rows import has_recurrent_layers
from ..architectures import architecture_for
from ..decoding.methods import method as registered_method
from ..decoding.paired import attach
from ..extras import require
from ..io.loading import load_model
from ..io.prompts import images_for, pixel_values_kwargs
from ..io.video import read_video
from ..scoring.forced import forced_steps
from ..scoring.scorer import PRIORS as SCORER_PRIORS
from ..scoring.scorer import CaptionScorer
from .evaluator_repairs import failed_choices_count_wrong, keep_loglikelihood_pairs
from .failed_documents import FAILED_ANSWER, FAILED_LOSS
from .model_args import check_device_arg, check_method, check_on_model

lmms = require("lmms_eval.api.model", "eval").lmms


class PndHf(lmms):
    """A Hugging Face vision-language checkpoint that pnd supports, decoding and scoring with prior normalization.

    model_args (all optional but `pretrained`):
        pretrained: Hugging Face id or local folder.
        alpha (0.5), prior ("masked", "text", "blank" or "noise"), plausibility (None): as for
            `pnd.PriorNormalized`; alpha=0 is the plain model.
        method ("cpn"): a decoding method of `pnd.decoding.methods` (cpn, vcd, icd, m3id, pai, only, vista), its
            settings as further model_args (e.g. method=vcd,noise_step=500; the others at the paper's defaults).
            `loglikelihood` scores each choice with the method's own score (at a neutral setting such as
            alpha=0: the plain model's), see `PndHf.loglikelihood`.
        max_frames_num (32): frames sampled uniformly from each video.
        dtype ("auto", "bfloat16", "float16" or "float32"), device (cuda if available, else cpu), device_map (None,
            e.g. "auto"), attn_implementation (None, e.g. "sdpa"), load_in_4bit / load_in_8bit (False, bitsandbytes).
        batch_size (lmms-eval's --batch_size, 1): documents `generate_until` decodes together and whose prompts
            `loglikelihood` runs together.
    Under `accelerate launch` each process holds a whole model and lmms-eval shards the documents.
    """

    model_types: tuple[str, ...] | None = None  # checkpoints this name accepts; None: any pnd supports

    def __init__(self, pretrained: str, alpha: float | None = None, prior: str | None = None,
                 plausibility: float | None = None, max_frames_num: int = 32, dtype: str = "auto",
                 device: str | None = None, device_map: str | None = None, attn_implementation: str | None = None,
                 load_in_4bit: bool = False, load_in_8bit: bool = False, batch_size: int | str = 1,
                 method: str = "cpn", **unknown):
        super().__init__()
        name = type(self).__name__
        self.method = registered_method(method)
        settings = {k: unknown.pop(k) for k in list(unknown) if k in self.method.defaults}
        if unknown:
            raise TypeError(f"{name}: unknown model_args {sorted(unknown)} (method={method} also takes "
                            f"{', '.join(self.method.defaults)}). See help(pnd.integrations.lmms_eval.PndHf).")
        given = {"alpha": alpha, "prior": prior, "plausibility": plausibility}
        self.settings = {**{k: v for k, v in given.items() if v is not None}, **settings}
        if not str(batch_size).isdigit() or int(batch_size) < 1:
            raise ValueError(f"{name}: --batch_size must be a positive integer (documents decoded or scored "
                             f"together), got {batch_size!r}.")
        self.batch_size_per_gpu = int(batch_size)
        if isinstance(max_frames_num, bool) or not str(max_frames_num).isdigit() or int(max_frames_num) < 1:
            raise ValueError(f"{name}: max_frames_num must be a positive integer (frames sampled per video), got "
                             f"{max_frames_num!r}; e.g. max_frames_num=32.")
        model_type = AutoConfig.from_pretrained(pretrained).model_type
        if self.model_types is not None and model_type not in self.model_types:
            raise ValueError(f"{name} takes {'/'.join(self.model_types)} checkpoints; {pretrained} is {model_type!r}. "
                             "Use --model pnd_hf for any architecture pnd supports.")
        self.normalizer = self.method.processor(**self.settings)
        check_method(name, self.method, self.normalizer)
        self.max_frames_num = int(max_frames_num)
        self.accelerator = Accelerator()
        self._rank, self._world_size = self.accelerator.process_index, self.accelerator.num_processes
        if self._world_size > 1 and device_map is None:
            device = str(self.accelerator.device)  # one whole model per process
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        check_device_arg(name, device)
        self.model, self.processor = load_model(pretrained, device=device, dtype=dtype, load_in_4bit=load_in_4bit,
                                                load_in_8bit=load_in_8bit, attn_implementation=attn_implementation,
                                                device_map=device_map)
        attach(self.model, self.processor)
        check_on_model(name, self.model, self.method, self.normalizer)
        self._device = self.model.device  # lmms-eval's clean() deletes the model, the device stays needed
        self.tokenizer = self.processor.tokenizer
        self._scorer = None
        self.said_text_only = False
        keep_loglikelihood_pairs()
        failed_choices_count_wrong()

    @property
    def device(self):
        return self._device

    def _batch_inputs(self, documents: list[tuple[str, list]]) -> dict:
        """Processor outputs for (context, visuals) documents in one left-padded batch, each one user turn
        [visuals..., context] plus the generation prompt (the prompts end where generation starts).

        This is the message lmms-eval builds for its chat models; videos are file paths, read with
        `pnd.io.video.read_video`, images PIL images.
        """
        texts, images, videos = [], [], []
        # a context that holds the processor's placeholder places its visuals itself (as lmms-eval's llava_hf)
        placeholders = {kind: str(getattr(self.processor, f"{kind}_token", None) or "")  # BLIP-2's: an AddedToken
                        for kind in ("image", "video")}
        for context, visuals in documents:
            is_video = [isinstance(v, (str, Path)) for v in visuals]
            kinds = ["video" if video else "image" for video in is_video]
            content = [{"type": kind} for kind in kinds if not (placeholders[kind] and placeholders[kind] in context)]
            content.append({"type": "text", "text": context})
            texts.append(self.processor.apply_chat_template([{"role": "user", "content": content}],
                                                            add_generation_prompt=True))
            videos += [read_video(v, self.max_frames_num) for v, video in zip(visuals, is_video) if video]
            document_images = [v for v, video in zip(visuals, is_video) if not video]
            images += [document_images] if document_images else []  # per document (SmolVLM's processor needs it)
        side, self.tokenizer.padding_side = self.tokenizer.padding_side, "left"
        try:
            inputs = self.processor(text=texts, images=images_for(self.processor, images) or None, videos=videos or None,
                                    return_tensors="pt", padding=True, **pixel_values_kwargs(self.processor))
        finally:
            self.tokenizer.padding_side = side
        return architecture_for(self.model).on_model(self.model, inputs)  # pixels in the model's dtype too

    def _visuals(self, doc_to_visual, task: str, split: str, doc_id: int):
        doc = self.task_dict[task][split][doc_id]
        return doc, doc_to_visual(doc) or []

    def generate_until(self, requests) -> list[str]:
        """Greedy (or sampled, with temperature > 0) prior-normalized decoding, with lmms-eval's generation kwargs.

        As lmms-eval's `llava_hf`: max_new_tokens (default 1024), temperature (0: greedy), top_p, num_beams;
        the text is cut at the first of the task's `until` strings, and generation stops at the checkpoint's own stop
        tokens and the tokenizer's. `--batch_size N` decodes up to N consecutive documents with the same generation
        kwargs together, left-padded (VCD's, prior noise: one per call). A document without an image or video is
        answered by the plain model.
        """
        outputs: list = [None] * len(requests)
        batches: list[list[int]] = []
        # VCD's noise is drawn for a call's whole pixel tensor: one document per call, so that no answer depends on
        # --batch_size or on the documents decoded beside it
        size = 1 if self.normalizer.needs_prior and self.normalizer.prior == "noise" else self.batch_size_per_gpu
        for i, request in enumerate(requests):
            if batches and len(batches[-1]) < size and requests[batches[-1][0]].args[1] == request.args[1]:
                batches[-1].append(i)
            else:
                batches.append([i])
        bar = tqdm(total=len(requests), desc="pnd generate_until", disable=self.rank != 0)
        failed: list[str] = []
        for batch in batches:
            decoded = self._each_document(lambda items: self._decode(requests, items), batch,
                                          lambda i: _document_name(*requests[i].args[3:]), failed)
            for i, text in zip(batch, decoded):
                outputs[i] = FAILED_ANSWER if text is None else text  # a failed document (reported): counts wrong
            bar.update(len(batch))
        bar.close()
        _report_failures("generate_until", failed, len(requests))
        return outputs

    def _decode(self, requests, batch: list[int]) -> list[str]:
        """The answers of the documents `batch` (indices into `requests`, same generation kwargs), decoded together;
        those without an image or video by the plain model (`_plain_without_visuals`)."""
        documents = []
        for i in batch:
            context, _, doc_to_visual, doc_id, task, split = requests[i].args
            documents.append((context, self._visuals(doc_to_visual, task, split, doc_id)[1]))
        gen_kwargs = requests[batch[0]].args[1]
        return self._plain_without_visuals(
            documents, lambda chosen: self._generate(chosen, gen_kwargs, [self.normalizer], self._contrast(chosen)),
            lambda chosen: self._generate(chosen, gen_kwargs, [], {}))

    def _generate(self, documents: list[tuple[str, list]], gen_kwargs: dict, processors: list, extra: dict) -> list[str]:
        """The answers of (context, visuals) `documents`, decoded together with lmms-eval's `gen_kwargs`."""
        inputs = self._batch_inputs(documents)
        until = gen_kwargs.get("until") or []
        temperature = gen_kwargs.get("temperature") or 0
        tokens = self.model.generate(
            **inputs, do_sample=temperature > 0, temperature=temperature if temperature > 0 else None,
            top_p=gen_kwargs.get("top_p"), num_beams=gen_kwargs.get("num_beams", 1),
            max_new_tokens=gen_kwargs.get("max_new_tokens", 1024), pad_token_id=self.tokenizer.eos_token_id,
            eos_token_id=self._stop_tokens(), logits_processor=processors, **extra,
        )
        texts = []
        for text in self.tokenizer.batch_decode(tokens[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True):
            for stop in [until] if isinstance(until, str) else until:
                text = text.split(stop)[0] if stop else text  # an empty stop string stops nothing (as lmms-eval's)
            texts.append(text)
        return texts

    def _stop_tokens(self) -> list[int]:
        """The checkpoint's own stop tokens (its generation config's: Gemma 3's end of turn, ...) and the tokenizer's."""
        own = self.model.generation_config.eos_token_id
        own = [] if own is None else [own] if isinstance(own, int) else list(own)
        return list(dict.fromkeys([*own, self.tokenizer.eos_token_id]))

    def _plain_without_visuals(self, documents: list[tuple[str, list]], run, run_plain) -> list:
        """`run(chosen)` on the documents (tuples, their visuals second) with an image or video and `run_plain(chosen)`
        on the others, one result per document in order. A text-only question has no visual input whose prior to
        remove: the plain model answers it (every method's limit there), as lmms-eval's own models do; said once."""
        results: list = [None] * len(documents)
        for visual, method in ((True, run), (False, run_plain)):
            chosen = [i for i, document in enumerate(documents) if bool(document[1]) == visual]
            if chosen and not visual and not self.said_text_only:
                print("pnd: documents without an image or video are answered by the plain model (no visual input "
                      "whose prior to remove).", file=sys.stderr)
                self.said_text_only = True
            for i, result in zip(chosen, method([documents[i] for i in chosen]) if chosen else []):
                results[i] = result
        return results

    def _contrast(self, documents: list[tuple[str, list]]) -> dict:
        """`generate`'s extra arguments for the method: ICD's `prior_inputs`, the same documents after its
        instruction; nothing for the other methods."""
        if self.method.contrast is None:
            return {}
        return {"prior_inputs": self._batch_inputs([(self.method.contrast_text(context, **self.settings), visuals)
                                                    for context, visuals in documents])}

    def _each_document(self, run, items: list, name_of, failed: list[str]) -> list:
        """`run(items)`, one result per item; where a document's input is bad (an unreadable video, a refused input:
        a ValueError), each item alone, a failing one getting None, its name (`name_of(item)`) added to `failed` and
        a line on stderr, so that one bad document never stops or changes the others."""
        try:
            return run(items)
        except ValueError as error:  # pnd.io.video.VideoReadError is one too
            if len(items) > 1:
                return [self._each_document(run, [item], name_of, failed)[0] for item in items]
            failed.append(name_of(items[0]))
            print(f"pnd: document {failed[-1]} failed ({error}); it counts as a wrong answer (generate_until: "
                  f"{FAILED_ANSWER!r}; loglikelihood: an infinite loss for every choice; pnd's tasks also count it "
                  "in their `failed` metric)", file=sys.stderr)
            return [None]

    def loglikelihood(self, requests) -> list[tuple[float, bool]]:
        """(loss, is_greedy) per request, in lmms-eval's convention: multiple_choice takes the argmin of the loss.

        loss = -(1/T) * sum_k [log P(t_k | v, x, t_<k) - alpha * log P(t_k | x, t_<k)] over the continuation's T
        tokens, placed right after the generation prompt; with alpha=0 it is the mean cross-entropy lmms-eval's
        HF models return, and so is any method's at its neutral setting (alpha=0; m3id forgetting_rate=0, ...). Under
        another method (VCD, ICD, M3ID, PAI, ONLY, VISTA), or cpn with prior blank or noise, each token's term is the
        method's own score of it (`pnd.scoring.forced`: e.g. VCD's `(1 + alpha) log p_c - alpha log p_d`), without the
        plausibility cut, which would give every cut choice the same infinite loss; one document and one choice per
        `generate` call. Under cpn (prior masked or text) and the plain model the choices of one document share one
        prompt prefix, and `--batch_size N` runs the prompts of up to N documents in one left-padded forward call,
        then scores each document's choices on its own prefix. A document without an image or video: the plain model's
        mean cross-entropy, whatever the method. is_greedy is always False (pnd does not compute it:
        multiple_choice tasks read only the loss; a task of output_type loglikelihood, whose acc is is_greedy, would
        read 0).
        """
        shared = _shares_prompts(self.method, self.normalizer)
        if self._scorer is None:  # where the method scores the choices, its scorer only tokenizes them
            normalized = shared and self.normalizer.needs_prior
            self._scorer = CaptionScorer(self.model, self.processor, alpha=self.normalizer.alpha if normalized else 0.0,
                                         reduction="mean", prior=self.normalizer.prior if normalized else "masked")
        groups: dict[tuple, list[int]] = {}
        for i, request in enumerate(requests):
            if len(request.args) != 6:
                raise ValueError("pnd's loglikelihood got a context-free request (the acc_mutual_info metric): pnd "
                                 "already divides by the prior; use the acc metric with alpha=1 instead.")
            context, _, _, doc_id, task, split = request.args
            groups.setdefault((task, split, doc_id, context), []).append(i)
        documents = list(groups.items())
        losses: list = [None] * len(requests)
        bar = tqdm(total=len(documents), desc="pnd loglikelihood", disable=self.rank != 0)
        # a recurrent layer's state would take a batch's left padding in (Qwen3.5): one document per call there
        step = 1 if has_recurrent_layers(self.model.config.get_text_config(decoder=True)) else self.batch_size_per_gpu
        score = self._score_documents if shared else self._method_scores
        step = step if shared else 1
        failed: list[str] = []
        for start in range(0, len(documents), step):
            batch = documents[start : start + step]
            scores = self._each_document(lambda items: score(requests, items), batch,
                                         lambda document: _document_name(document[0][2], *document[0][:2]), failed)
            for (_, indices), document_scores in zip(batch, scores):
                values = [FAILED_LOSS] * len(indices) if document_scores is None else [-x for x in document_scores]
                for i, loss in zip(indices, values):
                    losses[i] = (loss, False)
            bar.update(len(batch))
        bar.close()
        _report_failures("loglikelihood", failed, len(requests))
        return losses

    def _score_documents(self, requests, batch: list) -> list[list[float]]:
        """The normalized scores of each document's choices; `batch` holds ((task, split, doc_id, context), request
        indices) pairs, their prompts run in one left-padded forward call (text-only ones: the plain model's)."""
        documents = []
        for (task, split, doc_id, context), indices in batch:
            doc, visuals = self._visuals(requests[indices[0]].args[2], task, split, doc_id)
            documents.append((context, visuals, self._choices(requests, indices, doc)))

        def scores(chosen: list, plain: bool) -> list[list[float]]:
            inputs, choices = self._batch_inputs([(c, v) for c, v, _ in chosen]), [a for _, _, a in chosen]
            score = self._scorer.likelihoods if plain else self._scorer.score_prompts
            return [values.tolist() for values in score(inputs, choices)]

        return self._plain_without_visuals(documents, lambda chosen: scores(chosen, False),
                                           lambda chosen: scores(chosen, True))

    def _method_scores(self, requests, batch: list) -> list[list[float]]:
        """`_score_documents` where the method scores (`_shares_prompts` is False): one document, each choice forced
        through `generate` with the method (its plausibility cut off), the mean of the method's scores of its tokens;
        a text-only document's: the plain model's (`_score_documents`)."""
        ((task, split, doc_id, context), indices), = batch
        doc, visuals = self._visuals(requests[indices[0]].args[2], task, split, doc_id)
        if not visuals:
            return self._score_documents(requests, batch)
        inputs, extra = self._batch_inputs([(context, visuals)]), self._contrast([(context, visuals)])
        method, scores = self.normalizer.without_cut(), []
        for ids in map(self._scorer.caption_ids, self._choices(requests, indices, doc)):
            steps = forced_steps(self.model, inputs, method, ids, **extra)[2]
            scores.append(float(steps[torch.arange(len(ids)), ids].mean()))
        return [scores]

    @staticmethod
    def _choices(requests, indices: list[int], doc) -> list[str]:
        """The continuations of a document's requests (a task may give them as functions of the document)."""
        return [c if isinstance(c, str) else c(doc) for c in (requests[i].args[1] for i in indices)]

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("pnd's lmms-eval models do not support multi-round generation.")


class PndLlavaOnevision(PndHf):
    model_types = ("llava_onevision",)


class PndQwen2VL(PndHf):
    model_types = ("qwen2_vl", "qwen2_5_vl")


def _shares_prompts(method, normalizer) -> bool:
    """Whether `loglikelihood` scores with `CaptionScorer` (a document's choices on one prompt pass): the plain model
    (any method at its neutral setting) or cpn with a prior the scorer computes; else each choice is forced through
    `generate` with the method."""
    return not normalizer.needs_prior or (method.name == "cpn" and normalizer.prior in SCORER_PRIORS)


def _document_name(doc_id, task: str, split: str) -> str:
    return f"{task}/{split}/{doc_id}"


def _report_failures(kind: str, failed: list[str], total: int) -> None:
    if failed:
        print(f"pnd {kind}: {len(failed)} document(s) of {total} request(s) failed, each named above with its reason: "
              f"{', '.join(failed)}", file=sys.stderr)
