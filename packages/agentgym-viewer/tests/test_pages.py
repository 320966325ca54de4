"""The viewer's runs, run, episodes and compare pages over HTTP (a real server, no browser), its
guard (token, escaping, CSP, paths outside the roots), the index of a growing file, and the CLI's
refusal to listen on a non-loopback address without a token."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from agentgym_viewer.index import Index
from agentgym_viewer.server import serve_in_thread

# the smallest valid PNG: one transparent pixel
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6300010000000500010d0a2db40000000049454e44ae426082"
)


class _Tables(HTMLParser):
    """Cell texts of each ``<table>`` by its caption, and the links of each cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.links: dict[str, list[list[list[str]]]] = {}
        self._caption: str | None = None
        self._in_caption = False
        self._rows: list[list[str]] | None = None
        self._row_links: list[list[list[str]]] | None = None
        self._cell: list[str] | None = None
        self._cell_links: list[str] | None = None
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._rows, self._row_links, self._caption = [], [], ""
        elif tag == "caption":
            self._in_caption = True
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr" and self._rows is not None and not self._in_head:
            self._rows.append([])
            self._row_links.append([])  # type: ignore[union-attr]
        elif tag in ("td", "th") and self._rows is not None and not self._in_head:
            self._cell, self._cell_links = [], []
        elif tag == "a" and self._cell_links is not None:
            self._cell_links.append(dict(attrs).get("href") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "caption":
            self._in_caption = False
        elif tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None and self._rows:
            self._rows[-1].append(" ".join("".join(self._cell).split()))
            self._row_links[-1].append(self._cell_links or [])  # type: ignore[index]
            self._cell = self._cell_links = None
        elif tag == "table" and self._rows is not None:
            self.tables[self._caption or ""] = [r for r in self._rows if r]
            self.links[self._caption or ""] = [r for r in self._row_links or [] if r]
            self._rows = None

    def handle_data(self, data: str) -> None:
        if self._in_caption:
            self._caption = (self._caption or "") + data.strip()
        elif self._cell is not None:
            self._cell.append(data)


def table(html: str, caption: str) -> list[list[str]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables[caption]


def episode_rows(html: str) -> list[dict[str, str]]:
    """The Episodes table as dicts: id (from the first cell's link) and each column."""
    columns = ["run", "step", "env", "task", "category", "split", "return", "turns", "success", "termination"]
    out = []
    for cells in table(html, "Episodes"):
        if len(cells) != len(columns):
            continue  # "No episodes match."
        row = dict(zip(columns, cells, strict=True))
        row["id"] = re.match(r"Episode (\d+)", cells[0]).group(1)  # type: ignore[union-attr]
        out.append(row)
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("viewer-cache")


@pytest.fixture(scope="module")
def index(sample_run, hostile_episodes, cache) -> Index:
    ix = Index([sample_run.parent, hostile_episodes], cache=cache)
    yield ix
    ix.close()


@pytest.fixture(scope="module")
def url(index) -> str:
    with serve_in_thread(index) as base:
        yield base


@pytest.fixture(scope="module")
def client(url):
    with httpx.Client(base_url=url, timeout=30) as c:
        yield c


# -- runs and a run ----------------------------------------------------------------------------
def test_runs_page_lists_the_demo_run(client, index):
    r = client.get("/")
    assert r.status_code == 200
    rows = {row[0]: row for row in table(r.text, "Runs")}
    demo = rows["demo"]
    assert demo[1] == "native"  # Backend
    assert demo[2] == "babyai"  # Envs
    assert demo[3] == "2"  # Steps
    assert demo[6].startswith(str(index.run("demo").episodes))
    assert rows["hostile/episodes.jsonl"][1] == "files"
    assert 'href="/run/demo"' in r.text and 'href="/episodes?run=demo"' in r.text
    assert r.headers["content-security-policy"].startswith("default-src 'self'")
    assert r.headers["x-content-type-options"] == "nosniff"


def test_run_page_draws_a_chart_per_curve(client):
    r = client.get("/run/demo")
    assert r.status_code == 200
    assert re.search(r"<h1>\s*demo\s*</h1>", r.text)
    svgs = re.findall(r"<svg\b.*?</svg>", r.text, flags=re.S)
    titles = [re.search(r"<title[^>]*>(.*?)</title>", s).group(1) for s in svgs]  # type: ignore[union-attr]
    for curve in ("Return", "Success", "Horizon", "KL", "Entropy", "Tokens/s"):
        assert f"{curve} per step" in titles
    assert any(t.startswith("Success per env") for t in titles)
    assert all("<polyline" in s for s in svgs)
    assert 'class="val-points"' in r.text  # report.json's validation on the success chart
    assert "Episodes of this run" in r.text and "<dt>Algorithm</dt><dd>grpo</dd>" in r.text
    # the run's own plots, through the run's plots route
    assert re.search(r'<img src="/run/demo/plots/return.png"', r.text)
    png = client.get("/run/demo/plots/return.png")
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert client.get("/run/nope").status_code == 404


def test_not_found_page_uses_the_base_template(client):
    r = client.get("/nowhere")
    assert r.status_code == 404
    assert '<nav aria-label="Main">' in r.text and "<main" in r.text
    assert r.headers["content-security-policy"]


# -- episodes ----------------------------------------------------------------------------------
def test_episodes_filters(client, index):
    r = client.get("/episodes")
    total = index.query().total
    assert f"{total} episodes" in r.text
    assert len(episode_rows(r.text)) == min(total, 50)

    failures = episode_rows(client.get("/episodes", params={"success": "no", "per_page": 200}).text)
    assert failures and all(row["success"] == "no" for row in failures)
    assert len(failures) == index.query(success=False).total

    guess = episode_rows(client.get("/episodes", params={"env": "guess"}).text)
    assert [row["env"] for row in guess] == ["guess"]

    step1 = episode_rows(client.get("/episodes", params={"step": 1, "kind": "train"}).text)
    assert step1 and all(row["step"] == "1" for row in step1)
    assert len(step1) == index.query(step=1, kind="train").total

    evals = episode_rows(client.get("/episodes", params={"kind": "eval"}).text)
    assert len(evals) == 6 and all(row["step"] == "eval" for row in evals)
    assert all(row["success"] == "yes" for row in evals)  # the scripted expert

    both = episode_rows(client.get("/episodes", params={"kind": "eval", "success": "no"}).text)
    assert both == []

    assert client.get("/episodes", params={"step": "x"}).status_code == 400
    assert client.get("/episodes", params={"sort": "bogus"}).status_code == 400


def test_episodes_sorting_and_pagination(client, index):
    def returns(sort: str) -> list[float]:
        html = client.get("/episodes", params={"sort": sort, "per_page": 200}).text
        return [float(row["return"].replace(",", "")) for row in episode_rows(html)]

    down = returns("-return")
    assert down == sorted(down, reverse=True) and down[0] > down[-1]
    up = returns("return")
    assert up == sorted(up)
    turns = [int(r["turns"]) for r in episode_rows(client.get("/episodes?sort=-turns&per_page=200").text)]
    assert turns == sorted(turns, reverse=True)
    html = client.get("/episodes?sort=return").text
    assert re.search(r'aria-sort="ascending">\s*<button[^>]*value="-return"', html)  # header toggles

    total = index.query().total
    seen: list[str] = []
    page_url = "/episodes?per_page=5&sort=-return"
    pages = 0
    while page_url:
        html = client.get(page_url).text
        rows = episode_rows(html)
        assert 0 < len(rows) <= 5
        seen += [row["id"] for row in rows]
        assert ("Previous page" in html) == (pages > 0)
        nxt = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', html)
        page_url = nxt.group(1).replace("&amp;", "&") if nxt else None
        pages += 1
    assert pages == -(-total // 5)
    assert len(seen) == len(set(seen)) == total


def test_text_search_finds_an_episode_by_a_word_of_its_observation(client, index):
    row = index.query(kind="eval", per_page=1).rows[0]
    _, episode = index.episode(row["id"])
    word = max(re.findall(r"[A-Za-z]{4,}", episode.steps[0].observation), key=len)
    html = client.get("/episodes", params={"q": word.upper(), "per_page": 200}).text
    found = episode_rows(html)
    assert row["id"] in {int(r["id"]) for r in found}
    for r in found:  # every hit holds the word, case aside
        assert word.lower().encode() in index.raw(int(r["id"])).lower()
    assert "scanned" in html
    nothing = client.get("/episodes", params={"q": "no-such-word-anywhere"}).text
    assert episode_rows(nothing) == [] and "0 episodes found" in nothing


# -- compare and hostile text ------------------------------------------------------------------
def test_compare_shows_two_episodes_side_by_side(client, index):
    a = index.query(kind="train", per_page=1).rows[0]
    siblings = index.siblings(a["id"])
    assert siblings and all(s["env"] == a["env"] and s["task_id"] == a["task_id"] for s in siblings)
    b = siblings[0]
    r = client.get("/compare", params={"a": a["id"], "b": b["id"]})
    assert r.status_code == 200
    assert f'href="/episode/{a["id"]}">Episode {a["id"]}</a>' in r.text
    assert f'href="/episode/{b["id"]}">Episode {b["id"]}</a>' in r.text
    assert r.text.count('<li class="turn">') == a["num_turns"] + b["num_turns"]
    assert '<label for="compare-b">Compare with</label>' in r.text
    assert client.get("/compare", params={"a": 10**9}).status_code == 404
    assert client.get("/compare").status_code == 400


def test_hostile_text_is_escaped(client, index):
    eid = index.query(env="guess").rows[0]["id"]
    for path in (f"/compare?a={eid}", "/episodes?env=guess&q=pwned"):
        r = client.get(path)
        assert r.status_code == 200
        assert "<script>window" not in r.text and "<img src=x" not in r.text
        assert "<script" not in r.text.lower()
        assert r.headers["content-security-policy"].endswith("frame-ancestors 'none'")
    html = client.get(f"/compare?a={eid}").text
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=" in html


# -- paths outside the roots -------------------------------------------------------------------
@pytest.fixture(scope="module")
def traversal(tmp_path_factory, cache):
    """A run whose plots/ holds a real plot and a symlink to a file outside the root."""
    base = tmp_path_factory.mktemp("traversal")
    secret = base / "secret.txt"
    secret.write_text("TOP SECRET")
    run = base / "runs" / "mini"
    (run / "plots").mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "success": 0.5}) + "\n")
    (run / "config.yaml").write_text("name: mini\n")
    (run / "plots" / "ok.png").write_bytes(PNG)
    (run / "plots" / "leak.png").symlink_to(secret)
    ix = Index([base / "runs"], cache=cache)
    with serve_in_thread(ix) as base_url:
        yield base_url
    ix.close()


def _raw_get(base_url: str, path: str) -> tuple[int, bytes]:
    """GET ``path`` exactly as written (no client-side dot-segment clean-up)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_paths_outside_the_roots_are_not_served(traversal):
    assert _raw_get(traversal, "/run/mini/plots/ok.png")[0] == 200
    for path in (
        "/run/mini/plots/../../../etc/passwd",
        "/run/mini/plots/%2e%2e%2fconfig.yaml",
        "/run/mini/plots/..%2f..%2f..%2fetc%2fpasswd",
        "/run/mini/plots/config.yaml",
        "/run/mini/plots/leak.png",  # a symlink out of the root
        "/run/mini/plots/%2fetc%2fpasswd",
    ):
        status, body = _raw_get(traversal, path)
        assert status == 404, path
        assert b"TOP SECRET" not in body and b"root:" not in body and b"name: mini" not in body
    html = httpx.get(traversal + "/run/mini").text
    assert "ok.png" in html and "leak.png" not in html


# -- token -------------------------------------------------------------------------------------
def test_token_guards_every_page(index):
    with serve_in_thread(index, token="s3cret-token") as base:
        assert httpx.get(base + "/").status_code == 401
        assert httpx.get(base + "/episodes", params={"token": "wrong"}).status_code == 401
        assert httpx.get(base + "/static/viewer.css").status_code == 401
        assert httpx.get(base + "/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
        with httpx.Client(base_url=base) as c:
            r = c.get("/", params={"token": "s3cret-token"})
            assert r.status_code == 200
            cookie = r.headers["set-cookie"]
            assert "HttpOnly" in cookie and "s3cret-token" in cookie
            # the cookie carries the following links
            assert c.get("/episodes").status_code == 200
            assert c.get("/run/demo").status_code == 200


# -- the index ---------------------------------------------------------------------------------
def _lines(index: Index, n: int, start: int = 0) -> list[str]:
    """``n`` episodes as JSON lines (copies of the demo run's first, with new task ids)."""
    _, episode = index.episode(index.query(kind="train", per_page=1).rows[0]["id"])
    out = []
    for i in range(start, start + n):
        copy = episode.model_copy(update={"task_id": 900000 + i})
        out.append(copy.to_json())
    return out


def test_a_growing_file_is_indexed_from_where_it_stopped(index, tmp_path):
    path = tmp_path / "live" / "episodes.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(_lines(index, 3)) + "\n")
    live = Index([path], cache=tmp_path / "cache")
    try:
        assert live.query().total == 3
        first_ids = [r["id"] for r in live.query().rows]
        with path.open("a") as f:
            f.write("\n".join(_lines(index, 2, start=3)) + "\n")
        live.refresh(force=True)
        page = live.query(sort="task")
        assert page.total == 5
        assert [r["task_id"] for r in page.rows] == [900000 + i for i in range(5)]
        assert [r["id"] for r in live.query().rows][:3] == first_ids  # the first three kept, not re-read
        # a torn last line (a writer midway) is skipped until it is complete
        extra = _lines(index, 1, start=5)[0]
        with path.open("a") as f:
            f.write(extra[: len(extra) // 2])
        live.refresh(force=True)
        assert live.query().total == 5
        with path.open("a") as f:
            f.write(extra[len(extra) // 2 :] + "\n")
        live.refresh(force=True)
        assert live.query().total == 6
        assert live.episode(live.query(task_id=900005).rows[0]["id"])[1].task_id == 900005
    finally:
        live.close()
    # reopening reads nothing that did not change: the same ids
    again = Index([path], cache=tmp_path / "cache")
    try:
        assert [r["id"] for r in again.query().rows][:3] == first_ids
        assert again.query().total == 6
    finally:
        again.close()
    # a rewritten file (not an append) is indexed again from its start
    path.write_text("\n".join(_lines(index, 2, start=10)) + "\n")
    again = Index([path], cache=tmp_path / "cache")
    try:
        assert sorted(r["task_id"] for r in again.query().rows) == [900010, 900011]
    finally:
        again.close()


def test_metrics_skip_a_torn_line(tmp_path, cache):
    run = tmp_path / "runs" / "torn"
    (run / "episodes").mkdir(parents=True)
    (run / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "success": 0.25})
        + "\n"
        + json.dumps({"step": 2, "success": 0.5})
        + '\n{"step": 3, "succ'
    )
    ix = Index([tmp_path / "runs"], cache=cache)
    try:
        assert [m["step"] for m in ix.metrics("torn")] == [1, 2]
        info = ix.run("torn")
        assert (info.steps, info.best_success, info.last_success) == (2, 0.5, 0.5)
    finally:
        ix.close()


# -- the command -------------------------------------------------------------------------------
def test_cli_refuses_a_non_loopback_host_without_a_token(sample_run, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AGENTGYM_TOKEN"}
    env["AGENTGYM_VIEWER_CACHE"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "agentgym", "view", "--host", "0.0.0.0", "--no-open", str(sample_run)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "token" in lines[0], proc.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "agentgym", "view", "--no-open", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1
