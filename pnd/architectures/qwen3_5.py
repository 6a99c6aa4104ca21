"""Qwen3.5 (dense and MoE, `qwen3_5`, `qwen3_5_moe`): natively multimodal, with Qwen3-VL's processor and expansion
(per-frame `<t seconds>` timestamps, each followed by `<|vision_start|>` + that frame's `<|video_pad|>` tokens +
`<|vision_end|>`, all inside the `<|vision_start|>…<|vision_end|>` pair the chat template wrote).

The prior hides everything strictly inside the template's outermost pair, as for Qwen3-VL. The language model is
hybrid: Gated-DeltaNet layers (`linear_attention`, a recurrent state instead of keys and values) between full
attention layers. Its prior runs the kept tokens alone through every layer (docs/design.md, "The prior"): pnd's
prefill does that for any model with recurrent layers (`prior.masked_prefill`), whatever the family. Qwen4 (exp) writes
the same prompts; its language model puts indexed sparse attention between the Gated-DeltaNet layers and per-layer
n-gram embeddings in them, whose states travel with the prior rows too (`pnd/architectures/layers.py`).
"""

from .delimited import DelimitedArchitecture
from .registry import register

QWEN3_5 = register(
    DelimitedArchitecture(
        name="Qwen3.5 / Qwen3.5-MoE / Qwen4 (exp)",
        model_types=("qwen3_5", "qwen3_5_moe", "qwen4_exp"),
        pixel_keys=("pixel_values", "pixel_values_videos"),
        token_inputs=("mm_token_type_ids",),
        delimiters=(("vision_start_token_id", "vision_end_token_id"),),
    )
)
