"""Security of the three servers a user can expose: the env server (``agentgym serve``), the search
retrieval server (``agentgym search serve-retriever``) and the viewer (``agentgym view``).

Tokens are required where configured and compared in constant time; a non-loopback bind without one
is refused; no route serves a file outside its root; bodies are capped however they are sent; the
token never shows in logs or ``/metrics``.
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from agentgym.server.background import free_port, serve_in_thread
from agentgym.server.guard import MAX_BODY_BYTES

TOKEN = "tok-9f8e7d6c5b4a-SECRET"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer tok-9f8e7d6c5b4a-SECREX"}
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture(scope="module")
def env_server() -> Iterator[str]:
    with serve_in_thread(["guess"], token=TOKEN) as url:
        yield url


class _FakeBatcher:
    """What the retrieval server's app uses of a ``Batcher``: no index to build."""

    calls = 0

    def search_many(self, queries: list[str], k: int) -> list[list]:
        return [[] for _ in queries]


@contextlib.contextmanager
def _serve_app(app, on_logging=None, **config) -> Iterator[str]:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **config))
    if on_logging is not None:  # uvicorn.Config has (re)configured its loggers by now
        on_logging()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        threading.Event().wait(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def search_server() -> Iterator[str]:
    from agentgym_search.server import create_app

    app = create_app(_FakeBatcher(), name="fake", passages=0, token=TOKEN)
    with _serve_app(app, log_level="error", access_log=False) as url:
        yield url


@pytest.fixture(scope="module")
def viewer_root(tmp_path_factory) -> Path:
    """A run with one plot, a secret beside the root and a plot symlinked to it."""
    base = tmp_path_factory.mktemp("viewer")
    (base / "secret.txt").write_text("TOP SECRET")
    run = base / "runs" / "mini"
    (run / "plots").mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "success": 0.5}) + "\n")
    (run / "config.yaml").write_text("name: mini\n")
    (run / "plots" / "ok.png").write_bytes(PNG)
    (run / "plots" / "leak.png").symlink_to(base / "secret.txt")
    return base


@pytest.fixture(scope="module")
def viewer(viewer_root, tmp_path_factory) -> Iterator[str]:
    from agentgym_viewer.index import Index
    from agentgym_viewer.server import serve_in_thread as serve_viewer

    index = Index([viewer_root / "runs"], cache=tmp_path_factory.mktemp("viewer-cache"))
    with serve_viewer(index, token=TOKEN) as url:
        yield url
    index.close()


def _raw_get(base_url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET ``path`` exactly as written (no client-side dot-segment clean-up)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# -- tokens -------------------------------------------------------------------------------------

ENV_ROUTES = [
    ("GET", "/v1/envs", {}),
    ("POST", "/v1/sessions", {"json": {"env": "guess"}}),
    ("POST", "/v1/step", {"json": {"steps": []}}),
    ("POST", "/v1/reset", {"json": {"resets": []}}),
    ("GET", "/metrics", {}),
    ("GET", "/openapi.json", {}),
    ("GET", "/", {}),
    ("POST", "/create", {}),
    ("POST", "/guess/create", {}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), ENV_ROUTES, ids=[f"{m} {p}" for m, p, _ in ENV_ROUTES])
def test_env_server_needs_the_token(env_server, method, path, kwargs):
    with httpx.Client(base_url=env_server) as c:
        for headers, why in (({}, "missing"), (WRONG, "wrong"), ({"Authorization": TOKEN}, "wrong")):
            r = c.request(method, path, headers=headers, **kwargs)
            assert r.status_code == 401, (path, headers, r.text)
            assert r.json()["error"]["code"] == "unauthorized" and why in r.json()["error"]["message"]
            assert r.headers["www-authenticate"] == "Bearer"
        assert c.request(method, path, headers=AUTH, **kwargs).status_code == 200, path


def test_env_server_session_routes_need_the_token(env_server):
    with httpx.Client(base_url=env_server, headers=AUTH) as c:
        sid = c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"]
        compat = c.post("/create").json()["id"]
    routes = [
        ("POST", f"/v1/sessions/{sid}/step", {"json": {"action": "guess 1"}}),
        ("POST", f"/v1/sessions/{sid}/reset", {"json": {}}),
        ("GET", f"/v1/sessions/{sid}/observation", {}),
        ("GET", f"/v1/sessions/{sid}/expert", {}),
        ("POST", "/reset", {"json": {"id": compat, "data_idx": 1}}),
        ("POST", "/step", {"json": {"id": compat, "action": "guess 1"}}),
        ("GET", "/observation", {"params": {"id": compat}}),
        ("POST", "/close", {"json": {"id": compat}}),
        ("DELETE", f"/v1/sessions/{sid}", {}),
    ]
    for method, path, kwargs in routes:
        assert httpx.request(method, env_server + path, **kwargs).status_code == 401, path
        assert httpx.request(method, env_server + path, headers=WRONG, **kwargs).status_code == 401, path
        r = httpx.request(method, env_server + path, headers=AUTH, **kwargs)
        assert r.status_code == 200, (path, r.text)


def test_env_server_health_is_open_and_tells_nothing_secret(env_server):
    r = httpx.get(f"{env_server}/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["envs"] == ["guess"]
    assert set(body) == {
        "status",
        "protocol",
        "envs",
        "sessions",
        "workers",
        "step_timeout",
        "max_instances",
        "instances",
        "idle_instances",
    }
    assert TOKEN not in r.text


def test_search_server_needs_the_token(search_server):
    body = {"queries": ["who wrote hamlet"], "topk": 1}
    assert httpx.post(f"{search_server}/retrieve", json=body).status_code == 401
    r = httpx.post(f"{search_server}/retrieve", json=body, headers=WRONG)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert httpx.post(f"{search_server}/retrieve", json=body, headers=AUTH).json() == {"result": [[]]}
    assert httpx.get(f"{search_server}/openapi.json").status_code == 401
    assert httpx.get(f"{search_server}/health").status_code == 200  # open, as on the env server


def test_viewer_needs_the_token(viewer):
    for path in ("/", "/episodes", "/run/mini", "/run/mini/plots/ok.png", "/static/viewer.css"):
        assert httpx.get(viewer + path).status_code == 401, path
        assert httpx.get(viewer + path, headers=WRONG).status_code == 401, path
        assert httpx.get(viewer + path, params={"token": "wrong"}).status_code == 401, path
        assert httpx.get(viewer + path, headers=AUTH).status_code == 200, path


def test_token_checks_are_constant_time(env_server, search_server, viewer, monkeypatch):
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    for url, path in ((env_server, "/v1/envs"), (search_server, "/openapi.json"), (viewer, "/")):
        calls.clear()
        assert httpx.get(url + path, headers=WRONG).status_code == 401
        assert httpx.get(url + path, headers=AUTH).status_code == 200
        # both answers came from the constant-time comparison, of the whole token
        assert len(calls) == 2, (url, calls)
        assert all(TOKEN.encode() in pair for pair in calls), calls


# -- binding ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["serve", "guess"],
        ["search", "serve-retriever", "--retriever", "bm25"],
        ["view", "--no-open"],
    ],
    ids=["serve", "serve-retriever", "view"],
)
def test_non_loopback_bind_without_a_token_is_refused(command, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AGENTGYM_TOKEN"}
    if command[0] == "view":
        command = [*command, str(tmp_path)]
    proc = subprocess.run(
        [sys.executable, "-m", "agentgym", *command, "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode != 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "refusing" in lines[0] and "0.0.0.0" in lines[0] and "token" in lines[0]


# -- paths --------------------------------------------------------------------------------------

TRAVERSALS = [
    "../../../etc/passwd",
    "..%2f..%2f..%2fetc%2fpasswd",
    "%2e%2e%2fconfig.yaml",
    "%2e%2e%2f%2e%2e%2fsecret.txt",
    "%2fetc%2fpasswd",
    "....//....//etc/passwd",
    "config.yaml",
    "leak.png",  # a symlink out of the root
]


def test_viewer_file_routes_serve_nothing_outside_their_roots(viewer):
    assert _raw_get(viewer, "/run/mini/plots/ok.png", AUTH) == (200, PNG)
    paths = [f"/run/mini/plots/{t}" for t in TRAVERSALS]
    paths += [f"/run/{t}/plots/ok.png" for t in TRAVERSALS[:5]]
    paths += [f"/static/{t}" for t in ("../app.py", "..%2fapp.py", "%2e%2e/app.py", "..%2f..%2fsecret.txt")]
    for path in paths:
        status, body = _raw_get(viewer, path, AUTH)
        assert status == 404, (path, status)
        for secret in (b"TOP SECRET", b"root:", b"name: mini", b"import "):
            assert secret not in body, path


def test_env_server_render_takes_session_ids_only(env_server):
    # a slash (as is or %2f, decoded before routing) makes the path no route: 404; one segment that
    # is not an integer is refused by the route's validation: 422
    no_route = ("..%2f..%2fetc%2fpasswd", "../../etc/passwd", "1%2f..%2f..")
    for sid in (*no_route, "%2e%2e", "%00", "1;ls", "0x10"):
        status, body = _raw_get(env_server, f"/v1/sessions/{sid}/render", AUTH)
        assert b"root:" not in body
        expected = (404, "not_found") if sid in no_route else (422, "invalid_request")
        assert (status, json.loads(body)["error"]["code"]) == expected, (sid, status, body)


# -- body size ----------------------------------------------------------------------------------


def _post_raw(url: str, path: str, extra: list[str], chunks: list[bytes] | None = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *extra]
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as s:
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())

        def write() -> None:
            with contextlib.suppress(OSError):  # the server may answer before the end and stop reading
                for chunk in chunks or ():
                    s.sendall(chunk)

        writer = threading.Thread(target=write)
        writer.start()
        reply = http.client.HTTPResponse(s)
        reply.begin()
        body = reply.read()
        writer.join(timeout=60)
        return reply.status, body


def _chunks(size: int) -> list[bytes]:
    step = 1 << 20
    out = [
        b"%x\r\n" % min(step, size - i) + b"x" * min(step, size - i) + b"\r\n" for i in range(0, size, step)
    ]
    return [*out, b"0\r\n\r\n"]


@pytest.mark.parametrize("which", ["env", "search"])
def test_body_size_is_capped_by_content_length_and_by_counting_a_stream(env_server, search_server, which):
    url, path = (env_server, "/v1/step") if which == "env" else (search_server, "/retrieve")
    auth = f"Authorization: Bearer {TOKEN}"
    status, body = _post_raw(url, path, [auth, f"Content-Length: {MAX_BODY_BYTES + 1}"])
    assert status == 413 and json.loads(body)["error"]["code"] == "body_too_large"
    status, body = _post_raw(url, path, [auth, "Transfer-Encoding: chunked"], _chunks(MAX_BODY_BYTES + 4096))
    assert status == 413 and json.loads(body)["error"]["code"] == "body_too_large"
    # before the token too: an unauthenticated stream is cut off the same way, or refused at once
    status, _ = _post_raw(url, path, ["Transfer-Encoding: chunked"], _chunks(MAX_BODY_BYTES + 4096))
    assert status in (401, 413)
    assert httpx.get(f"{url}/health").status_code == 200


# -- secrets in logs and metrics ----------------------------------------------------------------


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_the_token_never_shows_in_logs_or_metrics(tmp_path):
    from agentgym.server.app import create_app

    capture = _Capture()
    loggers = [logging.getLogger(n) for n in ("uvicorn", "uvicorn.error", "uvicorn.access", "agentgym")]

    def attach() -> None:
        for logger in loggers:
            logger.addHandler(capture)

    try:
        app = create_app(["guess"], token=TOKEN)
        # uvicorn's access log at info: every request line is logged
        with _serve_app(app, attach, log_level="info", access_log=True) as url:
            with httpx.Client(base_url=url) as c:
                c.get("/v1/envs", headers=WRONG)
                c.get("/v1/envs", headers={"Authorization": f"Basic {TOKEN}"})
                c.get("/v1/envs")
                sid = c.post("/v1/sessions", json={"env": "guess"}, headers=AUTH).json()["session_id"]
                c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}, headers=AUTH)
                c.post(f"/v1/sessions/{sid}/step", content=b"{", headers=AUTH)
                c.post("/v1/sessions/99999/step", json={"action": "x"}, headers=AUTH)
                metrics = c.get("/metrics", headers=AUTH)
                health = c.get("/health")
    finally:
        for logger in loggers:
            logger.removeHandler(capture)
    assert metrics.status_code == 200 and "agentgym_requests_total" in metrics.text
    assert any("/v1/envs" in line and "401" in line for line in capture.lines), capture.lines
    for text in (*capture.lines, metrics.text, health.text):
        assert TOKEN not in text and TOKEN[4:] not in text


def test_agentgym_serve_logs_no_token(tmp_path):
    """``agentgym serve --token ... --log-level info``, as a user runs it: its whole log output."""
    log = tmp_path / "serve.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "AGENTGYM_TOKEN"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentgym",
                "serve",
                "guess",
                "--port",
                str(port),
                "--token",
                TOKEN,
                "--log-level",
                "info",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                assert proc.poll() is None, log.read_text()
                threading.Event().wait(0.1)
            assert httpx.get(f"{url}/v1/envs", headers=WRONG).status_code == 401
            assert httpx.get(f"{url}/v1/envs", headers=AUTH).status_code == 200
            metrics = httpx.get(f"{url}/metrics", headers=AUTH).text
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    assert "Uvicorn running" in text or "Application startup complete" in text, text
    assert TOKEN not in text and TOKEN not in metrics


def test_a_token_a_header_cannot_carry_is_refused_without_quoting_it():
    """A CR/LF in a token would start another header on the async pool's raw requests: both
    clients refuse it before a byte is sent, and the error does not quote it."""
    from agentgym.client import AsyncEnvPool
    from agentgym.client.transport import sync_client
    from agentgym.errors import AgentGymError

    bad = "tok-1\r\nX-Injected: yes"
    for make in (lambda: AsyncEnvPool("http://127.0.0.1:9", "guess", token=bad),
                 lambda: sync_client("http://127.0.0.1:9", token=bad, timeout=1)):  # fmt: skip
        with pytest.raises(AgentGymError, match="spaces, control or non-ASCII") as caught:
            make()
        assert "tok-1" not in str(caught.value)
