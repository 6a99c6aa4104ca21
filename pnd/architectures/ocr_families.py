"""OCR families of issue 36 (transformers 5.23), registered through the generic expansion finder (`reported.py`):

- DeepSeek-OCR 2 (`deepseek_ocr2`): `<image>` placeholders only, one per learned query of each view (the local tiles,
  then the global view) and one for the view separator; a SAM tower and a Qwen2-style query encoder on a DeepSeek
  language model (dense and mixture-of-experts layers). Its local tiles come as `pixel_values_local`.
- GOT-OCR 2.0 (`got_ocr2`): the template's `<img><imgpad></img>`, its `<imgpad>` replaced by `num_image_tokens`
  `<imgpad>` per image (256) and nothing else; a SAM-style tower on Qwen2. Its processor takes a flat list of images,
  one per prompt (a nested list needs `multi_page=True`): `pnd.io.prompts.images_for`.

Example:
    >>> import pnd
    >>> {"deepseek_ocr2", "got_ocr2"} <= set(pnd.supported_model_types())
    True
"""

from .registry import Architecture, register

DEEPSEEK_OCR2 = register(Architecture(name="DeepSeek-OCR 2", model_types=("deepseek_ocr2",),
                                      pixel_keys=("pixel_values", "pixel_values_local"), reported=True))
GOT_OCR2 = register(Architecture(name="GOT-OCR 2.0", model_types=("got_ocr2",), pixel_keys=("pixel_values",),
                                 reported=True))
