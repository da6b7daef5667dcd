"""The web view in a real browser: playwright driving Debian's chromium against one node for the module
(tests/web_support.py). Logging in, the graph of the seeded session, a node's citations opening their
event, the "as of" slider hiding a superseded version, 401 without a token, and a token for another
session that sees nothing of this one. With EVENTLOOM_UI_SCREENSHOTS=1 the screenshots go to docs/ui/
(the ones docs/ui.md shows), else to a temporary directory."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tests.conftest import REPO
from tests.web_support import OTHER, WEB, Told, web_deployment

pytestmark = pytest.mark.anyio
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1440, "height": 900}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def told(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Told]:
    async with web_deployment(Path(tmp_path_factory.mktemp("web-ui"))) as deployment:
        yield deployment


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} is not installed (`make test` installs Debian's chromium)"
        if os.environ.get("CI"):  # in CI the set-up should have installed it: a skip would hide that
            pytest.fail(missing)
        pytest.skip(missing)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield launched
        await launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("EVENTLOOM_UI_SCREENSHOTS") == "1":
        return REPO / "docs" / "ui"
    return Path(tmp_path_factory.mktemp("screenshots"))


class Console:
    """Every console error and uncaught exception of a page."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self.console)
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)


async def logged_in(browser: Browser, told: Told, token: str) -> tuple[Page, Console]:
    """A fresh browser context (no cookie) that logs in through the form and waits for the page."""
    context = await browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    page = await context.new_page()
    console = Console(page)
    first = await page.goto(f"{told.base}/ui")
    assert first is not None and first.status == 401
    await page.fill("#token", told.tokens[token])
    await page.click("button[type=submit]")
    try:
        await page.wait_for_selector("body[data-ready=true]", state="attached", timeout=15_000)
    except PlaywrightTimeout:
        raise AssertionError(f"the page did not load: {console.errors}") from None
    console.errors.clear()  # the login form's own 401
    return page, console


async def node_ids(told: Told, **params: Any) -> dict[str, str]:
    """Label -> node id, as the API answers for the admin."""
    async with httpx2.AsyncClient(base_url=told.base, timeout=30) as http:
        answer = await http.get(
            "/v1/graph/nodes", params=params, headers={"Authorization": f"Bearer {told.tokens['admin']}"}
        )
    return {node["label"]: node["id"] for node in answer.json()["nodes"]}


def node(page: Page, node_id: str) -> Any:
    return page.locator(f'[data-node-id="{node_id}"]')


async def test_the_page_shows_the_session_and_a_node_opens_its_citations(
    browser: Browser, told: Told, shots: Path
) -> None:
    ids = await node_ids(told, session=WEB)
    page, console = await logged_in(browser, told, "admin")
    assert await page.locator("#session").input_value() == WEB
    for label in ("d-cache (v1)", "d-cache (v2)", "price cache", "checkout api", "t-cache (v2)"):
        await node(page, ids[label]).wait_for()
    assert await node(page, ids["d-cache (v1)"]).get_attribute("data-superseded") == "true"
    assert await page.locator("#legend [data-legend-kind=decision]").count() == 1
    assert await page.locator(".link.system").count() >= 2  # SUPERSEDED_BY, the inferred edge
    if told.claims:
        for kind in ("observation", "claim", "resolution"):
            assert await page.locator(f"[data-kind={kind}]").count() >= 1, kind
    assert await page.locator("#timeline li[data-seq]").count() == len(
        [name for name, event in told.events.items() if event.session == WEB]
    )
    await page.wait_for_timeout(1200)  # let the layout settle for the picture
    await page.screenshot(path=shots / "graph.png")

    await node(page, ids["price cache"]).locator("circle").click()
    citation = page.locator(f'#citations a.citation[data-citation="{told.citation("fact")}"]')
    await citation.wait_for()
    await citation.click()
    await page.locator("#event-view [data-event-type='memory.fact.asserted']").wait_for()
    assert "checkout api" in await page.locator("#event-payload").inner_text()
    await page.screenshot(path=shots / "node-panel.png")
    assert console.errors == []
    await page.context.close()


async def test_the_slider_redraws_the_graph_as_it_was(browser: Browser, told: Told, shots: Path) -> None:
    ids = await node_ids(told, session=WEB)
    old, new = ids["d-cache (v1)"], ids["d-cache (v2)"]
    page, console = await logged_in(browser, told, "admin")
    await node(page, old).wait_for()
    slider = page.locator("#as-of")
    last = await slider.get_attribute("max")
    assert last is not None
    await slider.fill(last)  # the end: the graph as of the last event, the first version superseded
    await node(page, old).wait_for(state="detached")
    await node(page, new).wait_for()
    latest = max(event.ts for event in told.events.values() if event.session == WEB)
    assert await page.locator("#as-of-badge").get_attribute("data-as-of") == latest
    await slider.fill("0")  # the start: only what the first event wrote
    await node(page, old).wait_for()
    await node(page, new).wait_for(state="detached")
    assert await page.locator("#timeline li.future").count() > 0
    await page.click("#history")  # now, with the history: both versions again
    await node(page, new).wait_for()
    assert await node(page, old).count() == 1
    before = told.events["claim2" if told.claims else "inferred"]  # (before the resolution)
    await slider.fill(str(before.seq - 1))
    await node(page, old).wait_for(state="detached")
    await page.wait_for_timeout(800)
    await page.screenshot(path=shots / "as-of.png")
    assert console.errors == []
    await page.context.close()


async def test_no_token_gets_the_login_form_and_another_session_sees_nothing(
    browser: Browser, told: Told, shots: Path
) -> None:
    context = await browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    page = await context.new_page()
    refused = await page.goto(f"{told.base}/ui")
    assert refused is not None and refused.status == 401
    await page.fill("#token", "elt_not-a-token")
    await page.click("button[type=submit]")
    await page.locator("#login-error").wait_for()
    await page.screenshot(path=shots / "login.png")
    await context.close()

    ours = set((await node_ids(told, session=WEB)).values())
    page, console = await logged_in(browser, told, "other")
    await page.locator("[data-node-id]").first.wait_for()
    drawn = page.locator("[data-node-id]")
    shown = set(await drawn.evaluate_all("nodes => nodes.map(n => n.dataset.nodeId)"))
    assert shown and not shown & ours
    decisions = await page.locator("[data-kind=decision] text").all_text_contents()
    assert decisions == ["d-secret", "The other plan"]  # its name and its title
    options = await page.locator("#session option").evaluate_all("options => options.map(o => o.value)")
    assert options == [OTHER]
    timeline = await page.locator("#timeline").inner_text()
    assert "d-cache" not in timeline and "d-secret" in timeline
    assert console.errors == []
    await page.context.close()
