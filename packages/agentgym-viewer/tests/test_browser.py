"""The viewer in a real browser (Playwright driving Debian's Chromium; marker ``browser``).

A person's path through it, asserting on what the page shows: open the run a test made, filter to
failures, open an episode, step through its turns, see a BabyAI frame, compare, and play two moves
by hand. Screenshots of each page go to ``$AGENTGYM_TEST_ARTIFACTS/viewer`` (default
``.test-artifacts/viewer`` at the repository root) for a person to look at.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[3]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium on PATH (CI installs it: .ci/run)")


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("AGENTGYM_TEST_ARTIFACTS", ROOT / ".test-artifacts")) / "viewer"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser(sample_run):
    # sample_run first: it runs rollouts with asyncio.run, which fails once Playwright's sync API
    # runs its event loop in this thread (it did whenever the shuffled order made this module the
    # first to ask for the run)
    playwright = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser, sample_run):
    from agentgym_viewer.server import serve_in_thread

    with serve_in_thread([sample_run.parent]) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.base_url = url  # type: ignore[attr-defined]
        yield page
        page.close()


def test_a_person_replays_compares_and_plays(page, artifacts):
    from playwright.sync_api import expect

    page.goto(page.base_url + "/")
    runs = page.get_by_role("table", name="Runs")
    expect(runs).to_contain_text("demo")
    expect(runs).to_contain_text("native")
    page.screenshot(path=artifacts / "runs.png", full_page=True)

    page.get_by_role("link", name="demo", exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("demo")
    assert page.locator("svg").count() >= 3  # the curves
    page.screenshot(path=artifacts / "run.png", full_page=True)

    # the episodes of the run, filtered to failures
    page.get_by_role("link", name="Episodes of this run").click()
    page.get_by_label("Success").select_option(label="no")
    page.get_by_role("button", name="Filter").click()
    table = page.get_by_role("table", name="Episodes")
    expect(table).to_be_visible()
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    column = next(i for i, h in enumerate(headers, 1) if h.startswith("Success"))
    success_cells = table.locator(f"tbody tr td:nth-child({column})").all_inner_texts()
    assert success_cells and all(c.strip().lower() in ("no", "✗", "false") for c in success_cells), (
        success_cells
    )
    page.screenshot(path=artifacts / "failures.png", full_page=True)

    # an expert episode that solved a BabyAI task: step through its turns
    page.get_by_label("Success").select_option(label="yes")
    page.get_by_label("Kind").select_option(label="eval")
    page.get_by_role("button", name="Filter").click()
    page.goto(page.url + "&sort=-turns")  # the longest solved episode first: it has several turns
    page.get_by_role("table", name="Episodes").get_by_role("link", name="Episode").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Episode")
    expect(page.get_by_text("Turn 1 of")).to_be_visible()
    assert page.locator("mark.action").count() >= 1  # the parsed action is highlighted
    frame = page.get_by_role("img", name="Frame after turn 1", exact=True)
    expect(frame).to_be_visible()
    # A real BabyAI frame, rendered on request: visible is not yet loaded, so wait for its decode
    # (which rejects on a broken image) before reading its width.
    assert frame.evaluate("img => img.decode().then(() => img.naturalWidth > 0)")
    page.get_by_role("link", name="Next turn").click()
    expect(page.get_by_text("Turn 2 of")).to_be_visible()
    page.screenshot(path=artifacts / "replay.png", full_page=True)
    page.get_by_role("link", name="Previous turn").click()
    expect(page.get_by_text("Turn 1 of")).to_be_visible()

    # compare it with another episode of the same task
    page.get_by_role("link", name="Compare", exact=True).click()
    expect(page).to_have_url(re.compile(r".*/compare\?.*"))
    page.screenshot(path=artifacts / "compare.png", full_page=True)

    # play two moves by hand
    page.goto(page.base_url + "/play")
    page.get_by_label("Env").select_option("babyai")
    page.get_by_label("Task").fill("0")
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Playing babyai")
    for move in ("turn left", "move forward"):
        page.get_by_label("Action").fill(move)
        page.get_by_role("button", name="Send").click()
        expect(page.get_by_role("main")).to_contain_text(move)
    page.screenshot(path=artifacts / "play.png", full_page=True)


def test_hostile_text_stays_text_in_the_browser(browser, hostile_episodes):
    from agentgym_viewer.server import serve_in_thread

    with serve_in_thread([hostile_episodes]) as url:
        page = browser.new_page()
        page.goto(url + "/episodes")
        page.get_by_role("table", name="Episodes").get_by_role("link").first.click()
        page.get_by_role("link", name="All turns").click()
        assert page.evaluate("() => window.pwned === undefined")  # no script ran, no onerror fired
        assert "<script>window.pwned = 1</script>" in page.get_by_role("main").inner_text()
        page.close()
