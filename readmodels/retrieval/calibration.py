"""The fitted coefficients of the calibrated fusion, per vector space (see `calibrated.py`).

Written by `python bench/fit_fusion.py` (it prints this table's entries as JSON) on development data only:
the BEAM development conversations in `../shared/data/` and the hand-written fixtures in
`tests/fixtures/retrieval/`. A vector space without its own fit (`hash`, `minilm`, a plug-in) uses
`GENERIC`: the shape of the fitted one, rounded (reciprocal-rank-like weights for both lanes, a little
for their relative scores, "found by both" already counted by the ranks).
"""

from __future__ import annotations

from typing import Final

from readmodels.retrieval.calibrated import Calibration

GENERIC: Final = Calibration(
    vector_space="*",
    bias=-7.0,
    coefficients={
        "keyword": 1.0,
        "keyword_rr": 0.0,
        "keyword_rrf": 4.0,
        "vector": 1.5,
        "vector_rr": 0.0,
        "vector_rrf": 4.0,
        "vector_level": 0.0,
        "exact": 6.0,
        "traversal": 1.0,
        "verbatim": 1.0,
        "verbatim_rr": 0.5,
        "agree": -2.0,
        "entity": 0.0,
        "source": 0.0,
        "recency": 0.5,
    },
    fitted_on="set by hand from the wordllama fit",
)
CALIBRATIONS: Final[dict[str, Calibration]] = {
    "wordllama@0.4.0.post1-l2_supercat-mean/256": Calibration(
        vector_space="wordllama@0.4.0.post1-l2_supercat-mean/256",
        bias=-6.0026,
        coefficients={
            "exact": 6.0,
            "traversal": 1.0,
            "verbatim": 1.0,
            "verbatim_rr": 0.5,
            "verbatim_rrf": 0.0,
            "entity": 0.0,
            "source": 0.0,
            "keyword": 1.0374,
            "keyword_rr": 0.0,
            "keyword_rrf": 1.5561,
            "vector": 0.2594,
            "vector_rr": 0.0,
            "vector_rrf": 2.0748,
            "vector_level": 0.0,
            "agree": 0.0,
            "recency": 0.0,
        },
        fitted_on="beam500k-dev.json, locomo_mini.json, longmemeval_mini.json (2026-11-24)",
    ),
}


def calibration_for(vector_space: str | None) -> Calibration:
    """The fit for a vector space (an embedder's tag), or the generic one."""
    return CALIBRATIONS.get(vector_space or "", GENERIC)
