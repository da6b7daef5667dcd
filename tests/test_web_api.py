"""The web view's JSON API and its doors, without a browser: one node for the module (tests/web_support.py),
asked over real HTTP. The graph of a session and as it was, the timeline and the events its citations open,
the peers; 400 naming the parameter, 401 without a token, 403 for a session the token may not touch, and
a token for another session that sees nothing of this one."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.web.pages import INDEX, MANIFEST, STATIC
from tests.conftest import REPO
from tests.web_support import OTHER, WEB, Told, web_deployment

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def told(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Told]:
    async with web_deployment(Path(tmp_path_factory.mktemp("web-api"))) as deployment:
        yield deployment


async def get(told: Told, path: str, token: str | None = "admin", **params: Any) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {told.tokens[token]}"} if token else {}
    async with httpx2.AsyncClient(base_url=told.base, timeout=30) as http:
        return await http.get(path, params=params, headers=headers)


def by_label(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["label"]: node for node in graph["nodes"] if node["id"].startswith("graph:")}


async def test_the_graph_of_a_session_now_and_its_history(told: Told) -> None:
    response = await get(told, "/v1/graph/nodes", session=WEB)
    assert response.status_code == 200, response.text
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    graph = response.json()
    nodes = by_label(graph)
    assert {"d-cache (v1)", "d-cache (v2)", "price cache", "checkout api"} <= set(nodes)
    old, new = nodes["d-cache (v1)"], nodes["d-cache (v2)"]
    assert (old["kind"], old["superseded"], old["session"]) == ("decision", True, WEB)
    assert old["properties"]["summary"] == "Cache prices in Redis for 5 minutes"
    assert not new.get("superseded") and new["properties"]["summary"].endswith("60 seconds")
    assert old["citations"] == [told.citation("decision")] and new["citations"] == [told.citation("revised")]
    assert [v["citation"] for v in new["versions"]] == [told.citation("decision"), told.citation("revised")]
    assert old["valid_to"] == new["valid_from"] == told.events["revised"].ts.replace("+00:00", "Z")
    edges = {(e["source"], e["type"], e["target"]): e for e in graph["edges"]}
    lineage = edges[(old["id"], "SUPERSEDED_BY", new["id"])]
    assert lineage["system"] is True
    depends = edges[(nodes["checkout api"]["id"], "DEPENDS_ON", nodes["price cache"]["id"])]
    assert not depends.get("system") and depends["citation"] == told.citation("fact")
    inferred = edges[(nodes["price cache"]["id"], "RELATED_TO", new["id"])]
    assert inferred["system"] is True and inferred["trust"] == 0.8
    assert all(node["session"] == WEB for node in graph["nodes"] if node["id"].startswith("graph:"))
    assert "d-secret" not in nodes


async def test_as_of_leaves_out_what_was_superseded_by_then_and_what_came_after(told: Told) -> None:
    first, revised = told.events["decision"].ts, told.events["revised"].ts
    at_first = by_label((await get(told, "/v1/graph/nodes", session=WEB, as_of=first)).json())
    assert set(at_first) == {"d-cache (v1)", "t-cache (v1)"}
    at_end = by_label((await get(told, "/v1/graph/nodes", session=WEB, as_of=revised)).json())
    assert "d-cache (v2)" in at_end and "d-cache (v1)" not in at_end
    assert not any(node.get("superseded") for node in at_end.values())


async def test_search_and_neighbourhood(told: Told) -> None:
    found = by_label((await get(told, "/v1/graph/nodes", session=WEB, search="REDIS")).json())
    assert set(found) == {"d-cache (v1)", "d-cache (v2)", "price cache"}
    cache = found["price cache"]["id"]
    around = (await get(told, "/v1/graph/neighbourhood", node=cache, depth=1)).json()
    assert {"price cache", "checkout api", "d-cache (v2)"} <= set(by_label(around))
    by_name = (await get(told, "/v1/graph/neighbourhood", node="Checkout API", session=WEB)).json()
    assert {"price cache", "checkout api"} <= set(by_label(by_name))
    elsewhere = await get(told, "/v1/graph/neighbourhood", node="claims:Claim:x/1")
    assert not [node for node in elsewhere.json()["nodes"] if node["id"].startswith("graph:")]


async def test_timeline_and_the_events_citations_open(told: Told) -> None:
    timeline = (await get(told, "/v1/timeline", session=WEB)).json()
    events = timeline["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)) and timeline["next_seq"] is None
    first = events[0]
    assert (first["type"], first["actor"], first["citation"]) == (
        "decision.made",
        "agent:web",
        told.citation("decision"),
    )
    assert first["summary"] == "decision d-cache: Cache prices in Redis for 5 minutes"
    paged = (await get(told, "/v1/timeline", session=WEB, limit=2, from_seq=2)).json()
    assert [e["seq"] for e in paged["events"]] == [2, 3] and paged["next_seq"] == 4
    event = (await get(told, f"/v1/events/{WEB}/1")).json()
    assert event["payload"]["title"] == "Cache prices in Redis for 5 minutes"
    assert event["citation"] == told.citation("decision") and event["hash"] == told.events["decision"].hash
    missing = await get(told, f"/v1/events/{WEB}/999")
    assert missing.status_code == 404 and missing.json()["error"]["message"].startswith("seq:")


async def test_sessions_and_peers(told: Told) -> None:
    sessions = (await get(told, "/v1/sessions")).json()["sessions"]
    assert {"session": WEB, "events": len(told.events) - 1} in sessions
    assert {s["session"] for s in (await get(told, "/v1/sessions", "other")).json()["sessions"]} == {OTHER}
    peers = (await get(told, "/v1/peers")).json()
    graph = next(p for p in peers["projectors"] if p["consumer"] == "projector-graph")
    assert graph["lag"] == 0
    assert isinstance(peers["peers"], list) and not peers["warnings"]
    hidden = await get(told, "/v1/peers", "demo")  # hosts, pids and URLs: for admins only
    assert hidden.status_code == 403 and hidden.json()["error"]["message"].startswith("peers: needs an admin")


@pytest.mark.parametrize(
    ("path", "params", "named"),
    [
        ("/v1/graph/nodes", {"limit": "0"}, "limit"),
        ("/v1/graph/nodes", {"limit": "many"}, "limit"),
        ("/v1/graph/nodes", {"as_of": "yesterday"}, "as_of"),
        ("/v1/graph/nodes", {"session": "no/such"}, "session"),
        ("/v1/graph/nodes", {"search": "x" * 201}, "search"),
        ("/v1/graph/neighbourhood", {}, "node"),
        ("/v1/graph/neighbourhood", {"node": "price cache", "depth": "4"}, "depth"),
        ("/v1/timeline", {}, "session"),
        ("/v1/timeline", {"session": WEB, "limit": "-1"}, "limit"),
        (f"/v1/events/{WEB}/x", {}, "seq"),
        ("/v1/graph/nodes", {"after": f"{WEB}:3"}, "after"),
        ("/v1/graph/neighbourhood", {"node": "price cache", "after": f"{WEB}/0"}, "after"),
        ("/v1/graph/nodes", {"after": f"{WEB}/1", "after_wait_ms": "600000"}, "after_wait_ms"),
    ],
)
async def test_a_bad_parameter_is_a_400_naming_it(
    told: Told, path: str, params: dict[str, str], named: str
) -> None:
    response = await get(told, path, **params)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and error["message"].startswith(f"{named}:")


async def test_a_read_after_an_event_says_the_graph_had_applied_it(told: Told) -> None:
    position = f"{WEB}/{told.events['revised'].seq}"
    response = await get(told, "/v1/graph/nodes", session=WEB, after=position)
    assert response.status_code == 200, response.text
    consistency = response.json()["consistency"]
    assert consistency["after"] == {"session": WEB, "seq": told.events["revised"].seq}
    assert consistency["lagging"] == {}
    assert "d-cache (v2)" in by_label(response.json())
    refused = await get(told, "/v1/graph/nodes", "other", after=position)
    assert refused.status_code == 403, refused.text


async def test_no_token_no_view(told: Told) -> None:
    async with httpx2.AsyncClient(base_url=told.base, timeout=30) as http:
        # each 401 counts as a failed attempt of this address (10 a minute are allowed): few of them
        for path in ("/v1/graph/nodes", f"/v1/events/{WEB}/1"):
            refused = await http.get(path, headers={"Authorization": "Bearer elt_wrong"})
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        page = await http.get("/ui")
        assert page.status_code == 401 and 'name="token"' in page.text and "WebGraph" not in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert (await http.get("/ui/static/app.js")).status_code == 401
        admin = {"Authorization": f"Bearer {told.tokens['admin']}"}
        for sneaky in ("%2E%2E/api.py", "..%2Fapi.py", "index.html", "vendor/%2E%2E/app.js", "%2Fetc/passwd"):
            assert (await http.get(f"/ui/static/{sneaky}", headers=admin)).status_code == 404
        script = await http.get("/ui/static/vendor/d3.min.js", headers=admin)
        assert script.status_code == 200 and script.text.startswith("// https://d3js.org v7.9.2")
        assert (await http.post("/v1/graph/nodes", headers=admin)).status_code == 405


async def test_the_login_form_sets_an_http_only_strict_cookie(told: Told) -> None:
    async with httpx2.AsyncClient(base_url=told.base, timeout=30) as http:
        wrong = await http.post("/ui/login", data={"token": "elt_guess"})
        assert wrong.status_code == 401 and "not a valid gateway token" in wrong.text
        foreign = await http.post(
            "/ui/login", data={"token": told.tokens["demo"]}, headers={"Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403 and "set-cookie" not in foreign.headers
        login = await http.post("/ui/login", data={"token": told.tokens["demo"]})
        assert login.status_code == 303 and login.headers["location"] == "/ui"
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        me = await http.get("/v1/me")  # the client keeps the cookie
        assert me.json() == {"name": "demo", "role": "agent", "sessions": ["web-d*"]}
        page = await http.get("/ui")
        assert page.status_code == 200 and 'id="graph"' in page.text
        await http.get("/ui/logout")
        assert (await http.get("/v1/me")).status_code == 401
        http.cookies.set("eventloom_token", "elt_revoked")  # a stale cookie: one failed try, then forgotten
        stale = await http.get("/ui")
        assert stale.status_code == 401 and 'name="token"' in stale.text
        assert stale.headers["set-cookie"].startswith('eventloom_token="";')  # the browser forgets it


async def test_a_token_for_another_session_sees_nothing_of_this_one(told: Told) -> None:
    graph = (await get(told, "/v1/graph/nodes", "other")).json()
    assert {node["session"] for node in graph["nodes"]} == {OTHER}
    assert by_label(graph).keys() == {"d-secret"}
    for path, params in (
        ("/v1/graph/nodes", {"session": WEB}),
        ("/v1/graph/neighbourhood", {"session": WEB, "node": "price cache"}),
        ("/v1/timeline", {"session": WEB}),
        (f"/v1/events/{WEB}/1", {}),
    ):
        refused = await get(told, path, "other", **params)
        assert refused.status_code == 403, path
        assert refused.json()["error"]["message"] == f"session: this token may not touch session {WEB!r}"
    around = (await get(told, "/v1/graph/neighbourhood", "other", node="price cache")).json()
    assert around["nodes"] == []
    demo = (await get(told, "/v1/graph/nodes", "demo")).json()
    assert {node["session"] for node in demo["nodes"] if node.get("session")} == {WEB}


async def test_the_views_refusals_count_as_failed_attempts_but_lock_no_valid_token_out(told: Told) -> None:
    """Last in the module: it blocks this address's failing requests (as guessing tokens must be)."""
    admin = {"Authorization": f"Bearer {told.tokens['admin']}"}
    async with httpx2.AsyncClient(base_url=told.base, timeout=30) as http:
        forms = [(await http.get("/ui")).status_code for _ in range(12)]  # showing the form is no attempt
        assert forms == [401] * 12
        statuses = [(await http.get("/ui/static/app.js")).status_code for _ in range(12)]
        assert statuses[0] == 401 and statuses[-1] == 429
        blocked = await http.get("/v1/me", headers={"Authorization": "Bearer elt_wrong"})
        assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) >= 1
        assert (await http.get("/v1/me", headers=admin)).json()["name"] == "admin"
        assert (await http.get("/ui")).status_code == 401  # the form is still shown
        login = await http.post("/ui/login", data={"token": told.tokens["demo"]})
        assert login.status_code == 303 and (await http.get("/v1/me")).json()["name"] == "demo"


def test_every_file_the_page_loads_is_in_the_manifest_and_the_wheel() -> None:
    """What `/ui/static/` may serve exists, and pyproject's package data carries it (and the page)."""
    with (REPO / "pyproject.toml").open("rb") as file:
        carried = tomllib.load(file)["tool"]["setuptools"]["package-data"]["gateway.web"]
    for name in [*MANIFEST, INDEX, "vendor/LICENSE-d3"]:
        assert (STATIC / name).is_file(), name
        assert any(fnmatch.fnmatch(f"static/{name}", pattern) for pattern in carried), name
    page = (STATIC / INDEX).read_text()
    loaded = re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', page)
    assert len(loaded) == 4 and all(path.removeprefix("/ui/static/") in MANIFEST for path in loaded)
    assert set(re.findall(r'(?:src|href)="([^"]+)"', page)) - set(loaded) == {"/ui/logout"}  # nothing else
