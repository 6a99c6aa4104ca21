"""MiniMax-M3-VL (`minimax_m3_vl`): per image or group of frames the processor writes
`]<]start of image[>[…]<]end of image[>[` (with a timestamp when given), as it reports. Its block-sparse attention's
indexer anchors key blocks to slots, so the prior runs in the prompt's slots with the indexers choosing among the kept
keys (`pnd/architectures/layers.py`; the indexers are patched by `pnd._compat.repairs.mask_indexer_keys`).

Example:
    >>> MINIMAX_M3_VL.model_types
    ('minimax_m3_vl',)
"""

from .._compat.repairs import mask_indexer_keys, unmask_indexer_keys
from .registry import Architecture, register


class MiniMaxM3Architecture(Architecture):
    """MiniMax-M3-VL: its sparse layers' indexers take the kept keys from pnd (`pnd._compat.repairs.mask_indexer_keys`)."""

    def prepare(self, model) -> None:
        mask_indexer_keys(model)

    def unprepare(self, model) -> None:
        unmask_indexer_keys(model)


MINIMAX_M3_VL = register(MiniMaxM3Architecture(name="MiniMax-M3-VL", model_types=("minimax_m3_vl",),
                                               pixel_keys=("pixel_values", "pixel_values_videos"), reported=True))
