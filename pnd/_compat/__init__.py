"""Every private transformers API pnd relies on (and torch's `Tensor._version`), in one package, with the versions it
was checked against.

A transformers upgrade that renames one of these breaks only this package, and `tests/test_compat.py` (which checks
that each one exists with the arguments pnd passes) says which. One module per concern:

- `pnd._compat.generation`: `generate`'s internals (its generation config, first position ids, visual encoding,
  auto-compilation) and the tokenizer's padding;
- `pnd._compat.cache_rows`: what each kind of cache layer holds for its rows, read, written and copied;
- `pnd._compat.masks`: attention implementations and the masks transformers builds for them;
- `pnd._compat.repairs`: families' methods pnd repairs or patches, and the per-call context the patches read.
- `pnd._compat.weights`: torch's version counter of the parameters (`CaptionScorer`'s kept priors).

Example:
    >>> from pnd._compat import TRANSFORMERS_CHECKED
    >>> TRANSFORMERS_CHECKED
    '>=5.23,<5.24'
"""

TRANSFORMERS_CHECKED = ">=5.23,<5.24"  # the releases this package's calls were read and tested against
