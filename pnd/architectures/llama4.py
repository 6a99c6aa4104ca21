"""Llama 4 (`llama4`), images only: the family has no video processor.

Its processor writes, per image, `<|image_start|>`, the tiles' `<|patch|>` tokens with `<|tile_x_separator|>` between
tiles of a row and `<|tile_y_separator|>` after each row, `<|image|>`, the global view's patches and `<|image_end|>`;
the generic finder reads all of it from the processor's report (`reported=True`).

Its language model splits the prompt into fixed chunks of slots (chunked-attention RoPE layers) around NoPE layers of
full attention whose query temperature counts slots. The prior removes the expansion with every kept token in its
conditioned slot (docs/design.md §1): the chunks stay where they are in the conditioned sequence, and the NoPE
temperature is the conditioned pass's. So the prior's prefill runs the whole prompt in its slots with the visual ones
masked (`LayerKind.in_slot`, `pnd/architectures/layers.py`), and the paired cache keeps, as transformers' does, the
current chunk of each chunked layer.

What transformers does itself (5.23), which pnd follows rather than hides:
- any expansion of the batch crashes in plain `generate` (beam search, `num_return_sequences`): generate expands the
  encoded images through their `pooler_output`, which Llama 4's vision model leaves empty (its features are the
  `last_hidden_state`), so the features stay those of the unexpanded batch; pnd's `generate` fails the same way
  (tests/test_exactness.py `EXPANSION_CRASHES` shows both);
- its NoPE layers' temperature, log1p(floor((slot + 1) / floor_scale)) * attn_scale + 1, counts the left padding's
  slots: once a padded prompt reaches floor_scale (8192) slots, its row differs from the prompt alone in plain
  transformers. pnd's prior sits in the same slots, so a padded row equals plain transformers' padded row and the
  reference on the same padded batch (tests/test_layer_kinds.py, with floor_scale 4).

Example:
    >>> import pnd
    >>> "llama4" in pnd.supported_model_types()
    True
"""

from .registry import Architecture, register


class Llama4Architecture(Architecture):
    """Llama 4: its decoder is `model.language_model.model` (the model has no `model` of its own)."""

    def language_model(self, model):
        return model.language_model.model


LLAMA4 = register(Llama4Architecture(name="Llama 4", model_types=("llama4",), pixel_keys=("pixel_values",), reported=True))
