"""``agentgym serve --workers 2`` stops cleanly: on Ctrl-C (SIGINT to the whole process group, as a
terminal sends it) and on SIGTERM (to the server alone, as a process manager sends it), idle and
under a 64-session load. No traceback, one line saying the server stopped, nothing left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import pytest

from agentgym.server.background import free_port

SESSIONS = 64


def _start(port: int, log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agentgym", "serve", "guess", "--workers", "2", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,  # its own process group, as a terminal gives a foreground job
    )


def _wait_healthy(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail("agentgym serve did not start")


class _Load:
    """64 sessions stepped in batches, from a thread, until the server goes away."""

    def __init__(self, url: str):
        self.url, self.steps = url, 0
        self.stepping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.stepping.wait(60), "the load never stepped"

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            try:
                sids = [client.post("/v1/sessions", json={}).json()["session_id"] for _ in range(SESSIONS)]
                body = {"steps": [{"session_id": s, "action": "guess 50"} for s in sids]}
                while True:
                    client.post("/v1/step", json=body).raise_for_status()
                    self.steps += SESSIONS
                    if self.steps >= 10 * SESSIONS:
                        self.stepping.set()
            except (httpx.HTTPError, KeyError):  # the server stopped under it
                return


def _alive_in_group(pgid: int, timeout: float = 10.0) -> list[str]:
    """Processes of the group still running once ``timeout`` has passed (multiprocessing's resource
    tracker exits just after its server). Zombies aside: an orphan that exited waits for PID 1 to
    reap it, which a container's PID 1 may never do."""
    deadline = time.monotonic() + timeout
    while True:
        ps = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-g", str(pgid)], capture_output=True, text=True)
        alive = [line for line in ps.stdout.splitlines() if line.split()[1:2] != ["Z"]]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("load", [False, True], ids=["idle", "under_load"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_serve_stops_cleanly(sig: signal.Signals, load: bool):
    port = free_port()
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = _start(port, log)
        try:
            _wait_healthy(f"http://127.0.0.1:{port}", proc)
            traffic = _Load(f"http://127.0.0.1:{port}") if load else None
            if sig == signal.SIGINT:
                os.killpg(proc.pid, sig)  # the terminal's Ctrl-C reaches the workers too
            else:
                proc.send_signal(sig)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if traffic is not None:
            traffic.thread.join(timeout=60)
            assert traffic.steps >= 10 * SESSIONS
        log.seek(0)
        stderr = log.read()
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert stderr.rstrip().splitlines()[-1] == "agentgym: server stopped", stderr
    assert stderr.count("server stopped") == 1
    assert code == (0 if sig == signal.SIGINT else 128 + signal.SIGTERM), stderr
    assert _alive_in_group(proc.pid) == []
