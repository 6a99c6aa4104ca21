"""Tiny random-weight models of the families added through the generic expansion finder, one module per model type.

Each module defines `build(seed) -> (model, processor)`; `pnd.testing.tiny_model` imports it on demand, sharpens the
attention and binds the processor. No hub, no downloads.
"""
