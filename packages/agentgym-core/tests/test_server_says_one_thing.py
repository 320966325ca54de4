"""The server says one thing one way: the instance bound ``agentgym serve`` prints is the one it holds
and ``/health`` shows (computed once), and an unknown session gets one message on every route."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx

from agentgym.resources import Bound
from agentgym.server.background import free_port
from agentgym.server.config import ServerConfig


def test_the_bound_serve_prints_is_the_one_health_shows():
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTGYM_PLUGINS", "AGENTGYM_TOKEN")}
    server = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "serve", "guess", "--port", str(port)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        printed = server.stderr.readline()  # "guess: at most N instance(s) (memory allows N)"
        match = re.match(r"guess: at most (\d+) instance\(s\)", printed)
        assert match, printed
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
                time.sleep(0.2)
        assert health["max_instances"] == {"guess": int(match.group(1))}
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_bound_given_in_the_config_is_the_servers(server):
    url = server(["guess"], bounds={"guess": Bound(7, 7, None)})
    assert httpx.get(f"{url}/health").json()["max_instances"] == {"guess": 7}
    assert ServerConfig().bounds is None  # by default, computed when the server starts


def test_an_unknown_session_gets_one_message_on_every_route(server):
    url = server(["guess"])
    message = "unknown session 99 (closed, expired, or never created)"
    with httpx.Client(base_url=url) as c:
        single = [
            c.post("/v1/sessions/99/step", json={"action": "guess 1"}),
            c.post("/v1/sessions/99/reset", json={}),
            c.get("/v1/sessions/99/observation"),
            c.delete("/v1/sessions/99"),
        ]
        for r in single:
            assert (r.status_code, r.json()["error"]) == (
                404,
                {"code": "unknown_session", "message": message},
            )
        batched = [
            c.post("/v1/step", json={"steps": [{"session_id": 99, "action": "guess 1"}]}),
            c.post("/v1/reset", json={"resets": [{"session_id": 99}]}),
        ]
        for r in batched:
            assert r.json()["results"][0]["error"] == {"code": "unknown_session", "message": message}
