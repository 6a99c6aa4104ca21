"""Unlimited-OCR (`unlimited_ocr`): DeepSeek-OCR 2's vision (`<image>` placeholders only, one per learned query of each
view, a row newline and the view separator; its local tiles come as `pixel_values_local`) on a DeepSeek-V2-style
language model whose layers are reference sliding-window attention (R-SWA): each token sees the whole prompt and the
last `sliding_window` generated tokens. The generic finder reads the expansion from the processor's report.

Masking the visual slots is removal there (the window counts generated tokens only, so the prior rows keep the
prompt's slots: `LayerKind` "reference_sliding_attention"), but transformers 5.23's mask for it is wrong once the
window slides: `create_reference_sliding_window_causal_mask` reads the 2-D attention mask at (cache index + the
window's `kv_offset`) for every key, the prompt's included, which its cache keeps at indices [0, prompt length). A
masked prompt slot (left padding, the prior's hidden visual slots) then applies to the slot `kv_offset` further right,
so plain transformers decodes a left-padded prompt otherwise than the same prompt alone.

Repaired by `prepare`, in pnd's paired steps (a `PairedCache` holding the prior rows): the text model's R-SWA layers
get the mask built from a 2-D mask whose entry (j + kv_offset) is the real entry j for the prompt's slots j, the real
entries for the generated tokens; its full-attention layers (if any) the real mask
(`pnd._compat.masks.reference_window_masks`). A left-padded row then decodes as the prompt alone, and the prior's visual
slots stay hidden where they are (tests/test_unlimited_ocr.py, tests/test_layer_kinds.py). Plain `generate`, and so
`alpha=0`, keeps transformers' own mask, as Kosmos-2's padded rows keep transformers' positions
(`pnd/architectures/kosmos2.py`).

Example:
    >>> import pnd
    >>> "unlimited_ocr" in pnd.supported_model_types()
    True
"""

from __future__ import annotations

from .._compat.masks import reference_window_masks
from .registry import Architecture, register, unwrap, wrap


class UnlimitedOcrArchitecture(Architecture):
    def prepare(self, model) -> None:
        text_model = self.language_model(model)  # its forward may be accelerate's hook (a device map's block)
        wrap(text_model, "forward", _repaired_forward, text_model)

    def unprepare(self, model) -> None:
        unwrap(self.language_model(model), "forward")


def _repaired_forward(text_model, forward, input_ids=None, attention_mask=None, position_ids=None,
                      past_key_values=None, inputs_embeds=None, **kwargs):
    """The text model's `forward`, given in pnd's paired steps the masks that read the prompt's 2-D mask entries at
    their slots."""
    paired = getattr(past_key_values, "is_paired", False)  # pnd's `PairedCache`, holding the prior rows
    if paired and attention_mask is not None and attention_mask.ndim == 2:
        if inputs_embeds is None:
            input_ids, inputs_embeds = None, text_model.embed_tokens(input_ids)
        attention_mask = reference_window_masks(text_model.config, attention_mask, past_key_values, inputs_embeds,
                                                position_ids)
    return forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                   past_key_values=past_key_values, inputs_embeds=inputs_embeds, **kwargs)


UNLIMITED_OCR = register(UnlimitedOcrArchitecture(name="Unlimited-OCR", model_types=("unlimited_ocr",),
                                                  pixel_keys=("pixel_values", "pixel_values_local"), reported=True))
