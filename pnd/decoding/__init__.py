"""Decoding: the logits processor, the paired forward that `pnd.attach` installs, the prior and its caches.

    >>> from pnd.decoding.logits_processor import PriorNormalized
"""
