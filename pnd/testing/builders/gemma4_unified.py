"""Gemma 4 unified (encoder-free): `gemma4.build(seed, unified=True)`."""

from . import gemma4


def build(seed: int):
    return gemma4.build(seed, unified=True)
