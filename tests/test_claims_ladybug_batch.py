"""LadybugDB writes a batch's held rows over Arrow tables (`LOAD FROM`) from `ladybug_nodes.LOAD_CREATES` /
`LOAD_MATCHES` rows of a kind, and one statement per row below: both ways must write the same model. The
contract story is small (below the thresholds), so here every row goes through the tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.packs.claims import ladybug_links, ladybug_nodes
from gateway.packs.claims.ladybug_store import LadybugClaimsStore
from tests.claims_support import alice_story, project
from tests.test_claims_contract import everything

pytestmark = pytest.mark.anyio


async def test_arrow_tables_write_what_statements_per_row_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told = alice_story()
    answers = []
    for name, rows in (("per_row", 10**9), ("arrow", 1)):
        monkeypatch.setattr(ladybug_nodes, "LOAD_CREATES", rows)
        monkeypatch.setattr(ladybug_nodes, "LOAD_MATCHES", rows)
        monkeypatch.setattr(ladybug_links, "LOAD_MATCHES", rows)
        async with LadybugClaimsStore(tmp_path / f"{name}.lbug") as store:
            assert await project(store, told.events) == len(told.events)
            answers.append(await everything(store, told))
    assert answers[0] == answers[1]
