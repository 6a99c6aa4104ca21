"""docs/design.md §2 / issue 4: on a model with a planted caption prior, normalization fixes retrieval.

Trains the tiny synthetic-colour model (about 15 s) and measures; nothing here is a copied number.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))

import retrieval_demo  # noqa: E402


def test_prior_normalization_fixes_prior_biased_retrieval():
    results, prior = retrieval_demo.run(seed=0)
    plain_r1, plain_retrieved = results[0.0]
    best_alpha = max(results, key=lambda a: results[a][0])
    best_r1, best_retrieved = results[best_alpha]
    assert max(prior, key=prior.get) == "red"  # the measured prior concentrates on the planted colour
    assert plain_retrieved["red"] > 25 + 10  # likelihood retrieves the planted caption far too often
    assert best_alpha > 0 and best_r1 >= plain_r1 + 10
    assert best_retrieved["red"] < plain_retrieved["red"]
