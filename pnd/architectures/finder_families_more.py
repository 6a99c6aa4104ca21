"""More families added by registration alone (issue 36), all but PP-Chart2Table through the generic expansion finder
(`reported.py`): no expansion code. What their processors write besides placeholders (transformers 5.23):

- Command A Vision (`cohere2_vision`): `<|START_OF_IMG|>`, per tile (the grid's tiles, then the thumbnail) its
  `<|IMG_PATCH|>` tokens closed by `<|IMG_LINE_BREAK|>`, then `<|END_OF_IMG|>`; a Cohere 2 language model of sliding
  and full attention.
- Aya Vision: `<|START_OF_IMG|>`, per grid tile a `TILE_<i>` label (text) and its `<|IMG_PATCH|>` tokens, then
  `TILE_GLOBAL` and the thumbnail's, then `<|END_OF_IMG|>`; Cohere 2 sliding and full attention.
- FastVLM: `<image>` placeholders only (LLaVA's processor), read by a FastViT-MCi3 tower through timm.
- LightOnOCR: `<|image_pad|>` placeholders only (a Pixtral tower, 2x2 merged, on Qwen3).
- Granite Docling: Idefics3's layout (`<fake_token_around_image><row_i_col_j>` + `<image>` tokens per tile, a newline
  per tile row, then the global view between `<fake_token_around_image><global-img>` and `<fake_token_around_image>`);
  DeepStack vision features added to the image tokens' hidden states in the first language-model layers.
- Aria: `<|img|>` placeholders only (a projector of learned queries over an Idefics3 tower; a mixture-of-experts
  language model).
- Ovis2: `<IMG_START>`, the global view's `<IMG_ATOM>` tokens, `<IMG_GRID>`, the tiles' atoms separated by `<IMG_COL>`
  within a row and `<IMG_ROW>` between rows, then `<IMG_END>`; the structure tokens are embedded from the visual
  embedding table (visual indicators), not the text vocabulary.
- PaddleOCR-VL: `<|IMAGE_PLACEHOLDER|>` tokens only, inside the template's `<|IMAGE_START|>…<|IMAGE_END|>` pair;
  Qwen2-VL's M-RoPE positions from `mm_token_type_ids`.
- DeepSeek-VL: `<image_placeholder>` tokens only (a SigLIP tower and a two-layer aligner on Llama).
- DeepSeek-VL hybrid: `<image_placeholder>` tokens only; two pixel inputs (SigLIP's `pixel_values`, SAM's
  `high_res_pixel_values`).
- GLM-OCR: GLM-4.6V's processor (the one its checkpoint names): a video is, per frame group,
  `<|begin_of_image|>` + `<|image|>` tokens + `<|end_of_image|>` + `t seconds`; an image `<|image|>` tokens only;
  M-RoPE positions from `mm_token_type_ids`. Video with beam search crashes inside transformers' `generate` itself
  (GLM-OCR's `get_video_features` gets an empty list), as GLM-4.6V's: its tests run beam search on images.
- Qianfan-OCR: InternVL's image format, the template's `<image>` replaced by `<img>`, the tiles' `<IMG_CONTEXT>`
  tokens and `</img>` (Qwen3 language model).
- PP-Chart2Table (GOT-OCR 2.0's model): its processor replaces nothing (no replacement is reported), so the prompt
  must already hold the image's `<imgpad>` placeholders, one per image feature (the tiny model's chat template writes
  `<img>`, 4 `<imgpad>` and `</img>`). The generic finder has nothing to read: the family is registered with the
  placeholder rule (`reported=False`: the tokens of the config's `image_token_id`), as LLaVA is.

Example:
    >>> import pnd
    >>> {"cohere2_vision", "aya_vision", "granite_docling", "ovis2", "paddleocr_vl"} <= set(pnd.supported_model_types())
    True
"""

from .qwen2_vl import MRoPEArchitecture
from .registry import Architecture, register

COHERE2_VISION = register(Architecture(name="Command A Vision", model_types=("cohere2_vision",),
                                       pixel_keys=("pixel_values",), reported=True))
AYA_VISION = register(Architecture(name="Aya Vision", model_types=("aya_vision",),
                                   pixel_keys=("pixel_values",), reported=True))
FAST_VLM = register(Architecture(name="FastVLM", model_types=("fast_vlm",),
                                 pixel_keys=("pixel_values",), reported=True))
LIGHTON_OCR = register(Architecture(name="LightOnOCR", model_types=("lighton_ocr",),
                                    pixel_keys=("pixel_values",), reported=True))
GRANITE_DOCLING = register(Architecture(name="Granite Docling", model_types=("granite_docling",),
                                        pixel_keys=("pixel_values",), reported=True))
ARIA = register(Architecture(name="Aria", model_types=("aria",), pixel_keys=("pixel_values",), reported=True))
OVIS2 = register(Architecture(name="Ovis2", model_types=("ovis2",), pixel_keys=("pixel_values",), reported=True))
PADDLEOCR_VL = register(MRoPEArchitecture(name="PaddleOCR-VL", model_types=("paddleocr_vl",),
                                          pixel_keys=("pixel_values",), token_inputs=("mm_token_type_ids",),
                                          reported=True))
DEEPSEEK_VL = register(Architecture(name="DeepSeek-VL", model_types=("deepseek_vl",),
                                    pixel_keys=("pixel_values",), reported=True))
DEEPSEEK_VL_HYBRID = register(Architecture(name="DeepSeek-VL hybrid", model_types=("deepseek_vl_hybrid",),
                                           pixel_keys=("pixel_values", "high_res_pixel_values"), reported=True))
GLM_OCR = register(MRoPEArchitecture(name="GLM-OCR", model_types=("glm_ocr",),
                                     pixel_keys=("pixel_values", "pixel_values_videos"),
                                     token_inputs=("mm_token_type_ids",), reported=True))
QIANFAN_OCR = register(Architecture(name="Qianfan-OCR", model_types=("qianfan_ocr",),
                                    pixel_keys=("pixel_values",), reported=True))
PP_CHART2TABLE = register(Architecture(name="PP-Chart2Table", model_types=("pp_chart2table",),
                                       pixel_keys=("pixel_values",)))  # the placeholder rule: the processor reports nothing
