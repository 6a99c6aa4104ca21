"""Every family pnd supports with no code of its own: one registration each, sorted by model type.

A family with code of its own (an `Architecture` subclass of its own, a processor rewrite, a repair) has a module named
after it (`gemma3.py`, `janus.py`, ...), or after the mechanism it shares (`qformer.py`: BLIP-2 and InstructBLIP;
`prefix_lm.py`: PaliGemma and Gemma 3n); docs/families.md's table says where each model type is registered. What each
processor writes, and what the prior hides in it: docs/families.md, "What the processors write".

- `reported=True`: the expansion is what the bound processor reports replacing (`reported.py`, the generic finder).
- Without it: the placeholder rule, the tokens of the config's `image_token_id` / `video_token_id`.
- `DelimitedArchitecture` (`delimited.py`): everything inside the template's outermost delimiter pairs.
- `MRoPEArchitecture` (`qwen2_vl.py`): Qwen2-VL's M-RoPE positions.

Example:
    >>> import pnd
    >>> {"aya_vision", "glmga", "llava_onevision", "mistral3"} <= set(pnd.supported_model_types())
    True
"""

from .delimited import DelimitedArchitecture
from .qwen2_vl import MRoPEArchitecture
from .registry import Architecture, register

ARIA = register(Architecture(name="Aria", model_types=("aria",), pixel_keys=("pixel_values",), reported=True))
AYA_VISION = register(Architecture(name="Aya Vision", model_types=("aya_vision",), pixel_keys=("pixel_values",),
                                   reported=True))
COHERE2_VISION = register(Architecture(name="Command A Vision", model_types=("cohere2_vision",),
                                       pixel_keys=("pixel_values",), reported=True))
COSMOS3_EDGE = register(MRoPEArchitecture(name="Cosmos 3 Edge", model_types=("cosmos3_edge",),
                                          pixel_keys=("pixel_values", "pixel_values_videos"),
                                          token_inputs=("mm_token_type_ids",), reported=True))
DEEPSEEK_OCR2 = register(Architecture(name="DeepSeek-OCR 2", model_types=("deepseek_ocr2",),
                                      pixel_keys=("pixel_values", "pixel_values_local"), reported=True))
DEEPSEEK_VL = register(Architecture(name="DeepSeek-VL", model_types=("deepseek_vl",), pixel_keys=("pixel_values",),
                                    reported=True))
DEEPSEEK_VL_HYBRID = register(Architecture(name="DeepSeek-VL hybrid", model_types=("deepseek_vl_hybrid",),
                                           pixel_keys=("pixel_values", "high_res_pixel_values"), reported=True))
DOTS3_NOTE = register(Architecture(name="dots3", model_types=("dots3_note",),
                                   pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
EMU3 = register(Architecture(name="Emu3", model_types=("emu3",), pixel_keys=("pixel_values",), reported=True))
ERNIE4_5_VL = register(MRoPEArchitecture(name="ERNIE 4.5 VL", model_types=("ernie4_5_vl_moe",),
                                         pixel_keys=("pixel_values", "pixel_values_videos"),
                                         token_inputs=("mm_token_type_ids", "moe_mm_token_type_ids"), reuses_text=False,
                                         reported=True))
FAST_VLM = register(Architecture(name="FastVLM", model_types=("fast_vlm",), pixel_keys=("pixel_values",),
                                 reported=True))
GEMMA4 = register(Architecture(name="Gemma 4", model_types=("gemma4", "gemma4_unified"),
                               pixel_keys=("pixel_values", "pixel_values_videos"), token_inputs=("mm_token_type_ids",),
                               causal_prompt=False, reported=True))
GLM4V = register(DelimitedArchitecture(name="GLM-4.1V / GLM-4.5V / GLM-4.6V",
                                       model_types=("glm4v", "glm4v_moe", "glm46v"),
                                       pixel_keys=("pixel_values", "pixel_values_videos"),
                                       token_inputs=("mm_token_type_ids",),
                                       delimiters=(("image_start_token_id", "image_end_token_id"),
                                                   ("video_start_token_id", "video_end_token_id"))))
GLM5_NEXT = register(Architecture(name="GLM-5-next", model_types=("glm5_next",),
                                  pixel_keys=("pixel_values", "pixel_values_videos"),
                                  token_inputs=("mm_token_type_ids",), reported=True))
GLM_OCR = register(MRoPEArchitecture(name="GLM-OCR", model_types=("glm_ocr",),
                                     pixel_keys=("pixel_values", "pixel_values_videos"),
                                     token_inputs=("mm_token_type_ids",), reported=True))
GLMGA = register(MRoPEArchitecture(name="Glmga", model_types=("glmga",),
                                   pixel_keys=("pixel_values", "pixel_values_videos"),
                                   token_inputs=("mm_token_type_ids",), reported=True))
GOT_OCR2 = register(Architecture(name="GOT-OCR 2.0", model_types=("got_ocr2",), pixel_keys=("pixel_values",),
                                 reported=True))
GRANITE4_VISION = register(Architecture(name="Granite 4 Vision", model_types=("granite4_vision",),
                                        pixel_keys=("pixel_values",), reported=True))
GRANITE_DOCLING = register(Architecture(name="Granite Docling", model_types=("granite_docling",),
                                        pixel_keys=("pixel_values",), reported=True))
HUNYUAN_VL = register(MRoPEArchitecture(name="HunYuan-VL", model_types=("hunyuan_vl",), pixel_keys=("pixel_values",),
                                        token_inputs=("mm_token_type_ids",), reported=True))
INTERNVL = register(Architecture(name="InternVL", model_types=("internvl",), pixel_keys=("pixel_values",),
                                 reported=True, same_frame_counts=True))
KIMI_K25 = register(Architecture(name="Kimi K2.5", model_types=("kimi_k25",),
                                 pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
LFM3_VL = register(Architecture(name="LFM3-VL", model_types=("lfm3_vl",),
                                pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
LIGHTON_OCR = register(Architecture(name="LightOnOCR", model_types=("lighton_ocr",), pixel_keys=("pixel_values",),
                                    reported=True))
LLAVA = register(Architecture(name="LLaVA (1.5, NeXT, NeXT-Video, OneVision)",
                              model_types=("llava", "llava_next", "llava_next_video", "llava_onevision"),
                              pixel_keys=("pixel_values", "pixel_values_videos")))
MINICPM_OCR = register(Architecture(name="MiniCPM-OCR", model_types=("minicpm_ocr",),
                                    pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
MISTRAL3 = register(Architecture(name="Mistral 3 (Pixtral)", model_types=("mistral3",), pixel_keys=("pixel_values",),
                                 reported=True))
MISTRAL_LARGE4 = register(Architecture(name="Mistral Large 4", model_types=("mistral_large4",),
                                       pixel_keys=("pixel_values",), reported=True))
MUSE_GLIMMER = register(Architecture(name="Muse Glimmer", model_types=("muse_glimmer",),
                                     pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
MUSE_SPARK = register(Architecture(name="Muse Spark", model_types=("muse_spark",),
                                   pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
OVIS2 = register(Architecture(name="Ovis2", model_types=("ovis2",), pixel_keys=("pixel_values",), reported=True))
PADDLEOCR_VL = register(MRoPEArchitecture(name="PaddleOCR-VL", model_types=("paddleocr_vl",),
                                          pixel_keys=("pixel_values",), token_inputs=("mm_token_type_ids",),
                                          reported=True))
PERCEPTION_LM = register(Architecture(name="PerceptionLM", model_types=("perception_lm",),
                                      pixel_keys=("pixel_values", "pixel_values_videos")))
PP_CHART2TABLE = register(Architecture(name="PP-Chart2Table", model_types=("pp_chart2table",),
                                       pixel_keys=("pixel_values",)))
QIANFAN_OCR = register(Architecture(name="Qianfan-OCR", model_types=("qianfan_ocr",), pixel_keys=("pixel_values",),
                                    reported=True))
QWEN2_5_OMNI = register(MRoPEArchitecture(name="Qwen2.5-Omni (thinker)", model_types=("qwen2_5_omni_thinker",),
                                          pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
QWEN3_5 = register(DelimitedArchitecture(name="Qwen3.5 / Qwen3.5-MoE / Qwen4 (exp)",
                                         model_types=("qwen3_5", "qwen3_5_moe", "qwen4_exp"),
                                         pixel_keys=("pixel_values", "pixel_values_videos"),
                                         token_inputs=("mm_token_type_ids",),
                                         delimiters=(("vision_start_token_id", "vision_end_token_id"),)))
QWEN3_OMNI = register(MRoPEArchitecture(name="Qwen3-Omni (thinker)", model_types=("qwen3_omni_moe_thinker",),
                                        pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
QWEN3_VL = register(DelimitedArchitecture(name="Qwen3-VL / Qwen3-VL-MoE / Cosmos 3 Omni / Cohere Compass",
                                          model_types=("qwen3_vl", "qwen3_vl_moe", "cosmos3_omni", "cohere_compass"),
                                          pixel_keys=("pixel_values", "pixel_values_videos"),
                                          token_inputs=("mm_token_type_ids",),
                                          delimiters=(("vision_start_token_id", "vision_end_token_id"),)))
STEP3P7 = register(Architecture(name="Step 3.7", model_types=("step3p7",),
                                pixel_keys=("pixel_values", "pixel_values_local"), reported=True))
VIDEO_LLAMA_3 = register(Architecture(name="VideoLLaMA3", model_types=("video_llama_3",),
                                      pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
VIDEO_LLAVA = register(Architecture(name="Video-LLaVA", model_types=("video_llava",),
                                    pixel_keys=("pixel_values", "pixel_values_images", "pixel_values_videos")))
VIPLLAVA = register(Architecture(name="ViP-LLaVA", model_types=("vipllava",), pixel_keys=("pixel_values",),
                                 reported=True))
