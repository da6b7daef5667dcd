"""The fitted coefficients of the calibrated fusion, per vector space (see `calibrated.py`).

Written by `python bench/fit_fusion.py` (it prints this table's entries as JSON) on development data only:
the BEAM development conversations in `../shared/data/` and the hand-written fixtures in
`tests/fixtures/retrieval/`. A vector space without its own fit uses `GENERIC`, whose vector
coefficients are the mean of the fitted ones.
"""

from __future__ import annotations

from typing import Final

from readmodels.retrieval.calibrated import Calibration

GENERIC: Final = Calibration(
    vector_space="*",
    bias=-4.0,
    coefficients={
        "keyword": 2.0,
        "keyword_rr": 1.5,
        "vector": 4.0,
        "vector_rr": 1.5,
        "vector_level": 1.0,
        "exact": 3.0,
        "traversal": 1.0,
        "verbatim": 1.0,
        "verbatim_rr": 0.5,
        "agree": 0.5,
        "entity": 0.0,
        "source": 0.0,
        "recency": 0.5,
    },
    fitted_on="hand-set starting point",
)
CALIBRATIONS: Final[dict[str, Calibration]] = {
    "wordllama@0.4.0.post1-l2_supercat-mean/256": Calibration(
        vector_space="wordllama@0.4.0.post1-l2_supercat-mean/256",
        bias=-3.3207,
        coefficients={
            "exact": 3.0,
            "traversal": 1.0,
            "verbatim": 1.0,
            "verbatim_rr": 0.5,
            "entity": 0.0,
            "source": 0.0,
            "keyword": 0.2227,
            "keyword_rr": 2.0242,
            "vector": 3.1719,
            "vector_rr": 0.2375,
            "vector_level": -1.5444,
            "agree": 1.3422,
            "recency": 0.3604,
        },
        fitted_on="beam500k-dev.json, locomo_mini.json, longmemeval_mini.json (2026-11-24)",
    ),
}


def calibration_for(vector_space: str | None) -> Calibration:
    """The fit for a vector space (an embedder's tag), or the generic one."""
    return CALIBRATIONS.get(vector_space or "", GENERIC)
