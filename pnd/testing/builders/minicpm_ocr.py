"""MiniCPM-OCR: MiniCPM-V 4.6's vision side with Qwen3.5's hybrid language model (Gated-DeltaNet layers around full
attention) and 1-D positions; the tiny model is MiniCPM-V's (`pnd.testing`), under its own classes."""


def build(seed: int):
    from pnd.testing import _minicpmv

    return _minicpmv(seed, "minicpm_ocr")
