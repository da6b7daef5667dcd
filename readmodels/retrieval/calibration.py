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
    bias=-5.0,
    coefficients={
        "keyword_gated": 1.0,
        "vector_gated": 1.0,
        "exact": 6.0,
        "traversal": 1.0,
        "verbatim": 1.0,
        "verbatim_rr": 0.5,
        "recency": 0.0,
    },
    fitted_on="set by hand",
)
CALIBRATIONS: Final[dict[str, Calibration]] = {}


def calibration_for(vector_space: str | None) -> Calibration:
    """The fit for a vector space (an embedder's tag), or the generic one."""
    return CALIBRATIONS.get(vector_space or "", GENERIC)
