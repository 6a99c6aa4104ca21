"""Inputs and outputs: reading videos, building chat prompts, loading models.

    >>> from pnd.io.video import read_video
"""
