"""The coefficients of the calibrated fusion (see `calibrated.py`).

The ordering of document hits has no fitted weight (the gated features), so one set serves every vector
space: `python bench/fit_fusion.py` fits only the bias and the gated features' one coefficient, which make
the score a probability, on development data (the BEAM and LoCoMo development conversations in
`../shared/data/` and the two fixtures in `tests/fixtures/retrieval/`). What conversations cannot teach
(named entities, traversal, source chunks, recency) is set by hand. A vector space may still get its own
entry in `CALIBRATIONS`.
"""

from __future__ import annotations

from typing import Final

from readmodels.retrieval.calibrated import Calibration

GENERIC: Final = Calibration(
    vector_space="*",
    bias=-5.1384,
    coefficients={
        "keyword_gated": 0.3922,
        "vector_gated": 0.3922,
        "exact": 6.0,
        "traversal": 1.0,
        "verbatim": 1.0,
        "verbatim_rr": 0.5,
        "recency": 0.0,
    },
    fitted_on="bias and gated: beam500k-dev.json, locomo-dev.json, locomo_mini.json, longmemeval_mini.json "
    "(wordllama, 2026-11-29); the rest set by hand",
)
CALIBRATIONS: Final[dict[str, Calibration]] = {}


def calibration_for(vector_space: str | None) -> Calibration:
    """The fit for a vector space (an embedder's tag), or the generic one."""
    return CALIBRATIONS.get(vector_space or "", GENERIC)
