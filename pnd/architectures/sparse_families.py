"""Families whose language models run DeepSeek Sparse Attention with a per-key indexer (issue 36), registered through
the generic expansion finder (`reported.py`): no expansion code. Family notes (transformers 5.23):

- Mistral Large 4 (`mistral_large4`): Mistral 3's Pixtral tower and processor (`[IMG]` rows closed by `[IMG_BREAK]`,
  the last by `[IMG_END]`) on a DeepSeek-V3.2-style language model: MLA without query LoRA, LeRoPE, a log-position
  query scaling, NoPE layers, optional KV-sharing layers, and indexers that may reuse the previous layer's top-k.
- dots3 (`dots3_note`): its processor writes placeholders only (`<|imgpad|>`, `<|video_pad|>`; Qwen2-VL's image and
  Qwen3-VL's video processors, patches of one frame); the language model interleaves these sparse MLA layers with
  sliding-window MLA layers of their own head sizes (`per_layer_config`). Audio inputs are not exercised.
- Both: where a query's indexer scores tie (a zero hidden state scores every key 0), transformers' top-k breaks the
  ties by the number of keys, so the prior rows and the kept tokens run alone can pick other keys (in transformers
  itself); the tiny models give the padding token a random embedding for that reason.

What differs from GLM-5-next's indexed layers (docs/design.md §1): GLM-5-next's indexer compresses pools of
neighbouring slots into one candidate each, so a hidden visual slot would still shape a pool of kept ones: its prior
runs the kept tokens side by side (`compact`). These indexers score every key alone and take their top-k after the
attention mask (a masked key scores -inf): hiding a key is removing it, so the prior rows keep the prompt's slots, as
dots3's sliding-window layers need (their windows count slots). Both run the prior's prefill on the kept tokens
(`pnd/architectures/layers.py`, rows keyed by the text model type, as the layer type's name is GLM-5-next's).

Example:
    >>> import pnd
    >>> "mistral_large4" in pnd.supported_model_types()
    True
"""

from __future__ import annotations

from .registry import Architecture, register

MISTRAL_LARGE4 = register(Architecture(name="Mistral Large 4", model_types=("mistral_large4",),
                                       pixel_keys=("pixel_values",), reported=True))
DOTS3_NOTE = register(Architecture(name="dots3", model_types=("dots3_note",),
                                   pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
