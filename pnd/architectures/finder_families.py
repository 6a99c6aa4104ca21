"""Families added through the generic expansion finder alone (`reported.py`): each is a registration, with no expansion
code. What their processors write besides placeholders (transformers 5.23):

- Gemma 4 (and Gemma 4 Unified): per frame an `mm:ss` timestamp outside the frame's `<|image>…<image|>` pair, frames
  joined by spaces; visual blocks attend bidirectionally (`mm_token_type_ids`), so the prior's prefill is its own call.
- Cosmos 3 Edge: per frame `<t seconds>` + `<|vision_start|>…<|vision_end|>`, replacing the template's own pair.
- ERNIE 4.5 VL (MoE): placeholders only; `moe_mm_token_type_ids` routes visual tokens to the vision experts.
- Granite 4 Vision: placeholders only (row newlines are features at placeholder slots).
- Kimi K2.5: an `HH:MM:SS.mmm` timestamp before each `<|media_begin|>video<|media_content|>…<|media_end|>` chunk.
- Muse Glimmer: `<|vid_start|>`, per frame group `Time: t.ts` + placeholders, groups separated by
  `<|vid_frame_separator|>`, then `<|vid_end|>`; an image `<|image_start|>…<|image_end|>`.
- LFM3-VL: Qwen3-VL's format (`<t seconds>` + vision start/end per frame group); short-convolution layers beside full
  and sliding attention, so the prior's prefill runs the kept tokens alone.
- MiniCPM-OCR: MiniCPM-V's `<image_id>`, `<image>…</image>` and `<slice>…</slice>` blocks on Qwen3.5's hybrid
  language model.
- Mistral 3 (Pixtral's processor): `[IMG_BREAK]` after each row of `[IMG]` tokens, `[IMG_END]` after the last.
- Step 3.7: `<patch_start>…<patch_end>` per crop, `<patch_newline>` between crop rows, then `<im_start>…<im_end>` for
  the global view.
- HunYuan-VL: image tokens only (begin, row newlines and end are the merger's embeddings at image-token slots);
  4-axis xD-RoPE positions from `mm_token_type_ids`.
- GLM-5-next: GLM-4.6V's per-frame `<|begin_of_image|>…<|end_of_image|>` then `t seconds`; a NoPE language model of
  KDA linear attention and indexed sparse attention, so the prior's prefill runs the kept tokens alone
  (`pnd/architectures/layers.py`).
- MiniMax-M3-VL: per image or group of frames `]<]start of image[>[…]<]end of image[>[` (with a timestamp when given);
  block-sparse attention whose indexer anchors key blocks to slots, so the prior runs in the prompt's slots with the
  indexers choosing among the kept keys (`pnd/architectures/layers.py`, `pnd._compat.mask_indexer_keys`).
- Qwen3-Omni thinker: `<|image_pad|>` / `<|video_pad|>` tokens inside the template's vision start/end pair; M-RoPE
  positions with a time stride from `video_second_per_grid`.
- Qwen2.5-Omni thinker: `<|IMAGE|>` / `<|VIDEO|>` tokens inside the template's `<|vision_bos|>…<|vision_eos|>` pair;
  M-RoPE as Qwen3-Omni's. Audio (`input_features`, `use_audio_in_video`) is refused at alpha > 0 as for Qwen3-Omni: the
  prior hides the visual expansion only (audio interleaved with the frames would still reach it).
- Chameleon: an image is discrete VQ tokens: `<racm3:break>` + `<image>` x 1024 + `<eoss>` (the VQ codes' embeddings
  replace the `<image>` ones), all of it the expansion; the base model is the language model (no `language_model`).
  Its forward sets its VQ tokens' logits to the dtype's minimum: the prior's prefill logits get the same
  (`suppressed_tokens`).
- Idefics2: its processor's own `__call__` writes `<fake_token_around_image>` + `<image>` tokens +
  `<fake_token_around_image>` per image (5 blocks with image splitting) and a space after a closing fake token that a
  word follows; pnd rewrites the prompt as it does to report the spans (`pnd/architectures/idefics2.py`). The token
  that space merges into (` Describe` after `<image>Describe`) is part of the expansion (docs/design.md §1: it exists
  only through the insertion). Its processor takes PIL images, paths or URLs only (transformers' `load_image`).
- Emu3: discrete VQ tokens as Chameleon's: `<|image start|>H*W<|image token|>` + `<image>` x H * (W + 1) +
  `<|extra_201|><|image end|>` per image, the code grid's size text included; language model at `text_model`. Its
  processor takes PIL images or numpy arrays only.
- Janus: `<begin_of_image>` + `<image_placeholder>` tokens + `<end_of_image>` per image (continuous SigLIP features for
  understanding; its VQ-VAE only generates images), markers included. Its `generate` drops `logits_processor` in
  text mode (transformers 5.23), which would silently decode without the prior: `JanusArchitecture.prepare` gives the
  model a `generate` that keeps it.
- ViP-LLaVA: LLaVA's processor, `<image>` tokens only.

Example:
    >>> import pnd
    >>> {"gemma4", "mistral3", "step3p7", "hunyuan_vl", "qwen3_omni_moe_thinker"} <= set(pnd.supported_model_types())
    True
"""

import functools

from transformers import GenerationMixin

from .._compat import mask_indexer_keys, unmask_indexer_keys
from . import idefics2  # noqa: F401  (Idefics2's processor reports its replacements through it)
from .qwen2_vl import MRoPEArchitecture
from .registry import Architecture, register, repair


class ChameleonArchitecture(Architecture):
    """Chameleon: its forward sets the logits of its VQ image tokens to the dtype's minimum (it never writes them)."""

    def suppressed_tokens(self, model) -> list[int]:
        return model.model.vocabulary_mapping.image_tokens


def _janus_generate(model, *args, generation_mode: str = "text", **kwargs):
    """Janus's `generate` with `logits_processor` kept in text mode (its own drops it: transformers 5.23)."""
    if generation_mode != "text":
        return type(model).generate(model, *args, generation_mode=generation_mode, **kwargs)
    return GenerationMixin.generate(model, *args, guidance_scale=None, **kwargs)


class JanusArchitecture(Architecture):
    """Janus: its `generate` drops the `logits_processor` argument in text mode, so pnd gives the model one that
    keeps it (as Janus's does otherwise: `GenerationMixin.generate` without classifier-free guidance)."""

    def prepare(self, model) -> None:
        if "generate" not in vars(model):
            model.generate = repair(functools.partial(_janus_generate, model))

    def unprepare(self, model) -> None:
        vars(model).pop("generate", None)


class MiniMaxM3Architecture(Architecture):
    """MiniMax-M3-VL: its sparse layers' indexers take the kept keys from pnd (`pnd._compat.mask_indexer_keys`)."""

    def prepare(self, model) -> None:
        mask_indexer_keys(model)

    def unprepare(self, model) -> None:
        unmask_indexer_keys(model)


GEMMA4 = register(Architecture(name="Gemma 4", model_types=("gemma4", "gemma4_unified"),
                               pixel_keys=("pixel_values", "pixel_values_videos"), token_inputs=("mm_token_type_ids",),
                               causal_prompt=False, reported=True))
COSMOS3_EDGE = register(MRoPEArchitecture(name="Cosmos 3 Edge", model_types=("cosmos3_edge",),
                                          pixel_keys=("pixel_values", "pixel_values_videos"),
                                          token_inputs=("mm_token_type_ids",), reported=True))
ERNIE4_5_VL = register(MRoPEArchitecture(name="ERNIE 4.5 VL", model_types=("ernie4_5_vl_moe",),
                                         pixel_keys=("pixel_values", "pixel_values_videos"),
                                         token_inputs=("mm_token_type_ids", "moe_mm_token_type_ids"), reuses_text=False,
                                         reported=True))
GRANITE4_VISION = register(Architecture(name="Granite 4 Vision", model_types=("granite4_vision",),
                                        pixel_keys=("pixel_values",), reported=True))
KIMI_K25 = register(Architecture(name="Kimi K2.5", model_types=("kimi_k25",),
                                 pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
MUSE_GLIMMER = register(Architecture(name="Muse Glimmer", model_types=("muse_glimmer",),
                                     pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
LFM3_VL = register(Architecture(name="LFM3-VL", model_types=("lfm3_vl",),
                                pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
MINICPM_OCR = register(Architecture(name="MiniCPM-OCR", model_types=("minicpm_ocr",),
                                    pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
MISTRAL3 = register(Architecture(name="Mistral 3 (Pixtral)", model_types=("mistral3",), pixel_keys=("pixel_values",),
                                 reported=True))
STEP3P7 = register(Architecture(name="Step 3.7", model_types=("step3p7",),
                                pixel_keys=("pixel_values", "pixel_values_local"), reported=True))
HUNYUAN_VL = register(MRoPEArchitecture(name="HunYuan-VL", model_types=("hunyuan_vl",), pixel_keys=("pixel_values",),
                                        token_inputs=("mm_token_type_ids",), reported=True))
QWEN3_OMNI = register(MRoPEArchitecture(name="Qwen3-Omni (thinker)", model_types=("qwen3_omni_moe_thinker",),
                                        pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
MINIMAX_M3_VL = register(MiniMaxM3Architecture(name="MiniMax-M3-VL", model_types=("minimax_m3_vl",),
                                               pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
GLM5_NEXT = register(Architecture(name="GLM-5-next", model_types=("glm5_next",),
                                  pixel_keys=("pixel_values", "pixel_values_videos"),
                                  token_inputs=("mm_token_type_ids",), reported=True))
QWEN2_5_OMNI = register(MRoPEArchitecture(name="Qwen2.5-Omni (thinker)", model_types=("qwen2_5_omni_thinker",),
                                          pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
CHAMELEON = register(ChameleonArchitecture(name="Chameleon", model_types=("chameleon",), pixel_keys=("pixel_values",),
                                          reported=True))
IDEFICS2 = register(Architecture(name="Idefics2", model_types=("idefics2",), pixel_keys=("pixel_values",),
                                 reported=True))
EMU3 = register(Architecture(name="Emu3", model_types=("emu3",), pixel_keys=("pixel_values",), reported=True))
JANUS = register(JanusArchitecture(name="Janus", model_types=("janus",), pixel_keys=("pixel_values",), reported=True))
VIPLLAVA = register(Architecture(name="ViP-LLaVA", model_types=("vipllava",), pixel_keys=("pixel_values",),
                                 reported=True))
