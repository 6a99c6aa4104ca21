"""Decoding: the logits processors (PriorNormalized, M3ID, the registry of methods), the paired forward that `pnd.attach`
installs, the prior, the contrast rows and their caches.

    >>> from pnd.decoding.logits_processor import PriorNormalized
"""
