"""JVM lifecycle: one per env, reused, stopped on close, on garbage collection, on an idle session's
reaping, on a hung step, and never outliving its server (marker ``java``). Processes are counted in
/proc."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from agentgym_sciworld.simulator import SimulatorTimeout
from agentgym_sciworld.tasks import task_id_of

import agentgym
from agentgym.client import RemoteEnv
from agentgym.errors import EnvCrashedError
from agentgym.plugins import get_env_spec
from agentgym.resources import instance_bound
from agentgym.server.host import EnvHost
from agentgym.testing import serve_in_process, serve_in_thread

FIND = task_id_of("find-living-thing", 230)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process; None if gone. A zombie counts as gone: it has exited,
    and only its parent's bookkeeping is left."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text.rsplit(")", 1)[1].split()[:2]
    return None if state in "ZX" else (state, int(ppid))


def _alive(pid: int) -> bool:
    return _stat(pid) is not None


def java_descendants(root: int) -> set[int]:
    """Live java processes below ``root`` (children, grandchildren, ...)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            parents[int(entry)] = st[1]
    found = set()
    for pid in parents:
        p = pid
        while p in parents and p != root:
            p = parents[p]
        if p == root and pid != root:
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                    found.add(pid)
            except OSError:
                pass
    return found


def wait_gone(pids: set[int], timeout: float = 20.0) -> set[int]:
    """Wait until none of ``pids`` is alive; returns those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if _alive(p)}
        if not left:
            return left
        time.sleep(0.1)
    return {p for p in pids if _alive(p)}


def test_one_jvm_per_env_reused_and_stopped_on_close():
    before = java_descendants(os.getpid())
    env = agentgym.make("sciworld")
    pid = env.jvm_pid
    assert java_descendants(os.getpid()) - before == {pid}  # started with the env, one
    env.reset(options={"task_id": 0})
    env.reset(options={"task_id": FIND})
    env.step("look around")
    assert java_descendants(os.getpid()) - before == {pid}  # still the same one
    env.close()
    assert not _alive(pid)
    env.close()  # idempotent


def test_an_env_dropped_without_close_stops_its_jvm():
    env = agentgym.make("sciworld")
    pid = env.jvm_pid
    del env
    gc.collect()
    assert not wait_gone({pid}, 10)


def test_a_hung_step_is_an_error_and_the_next_reset_starts_a_new_jvm():
    env = agentgym.make("sciworld", step_timeout=1.0)
    try:
        env.reset(options={"task_id": FIND})
        old = env.jvm_pid
        os.kill(old, signal.SIGSTOP)  # the simulator stops answering
        t0 = time.monotonic()
        with pytest.raises(SimulatorTimeout, match="did not answer 'look around' within 1 s"):
            env.step("look around")
        assert time.monotonic() - t0 < 5
        assert not _alive(old)
        obs, _ = env.reset(options={"task_id": FIND})
        assert env.jvm_pid != old and "This room is called" in obs
    finally:
        env.close()


def test_a_hung_step_in_a_server_is_an_env_error_and_the_session_is_cleaned_up():
    host = EnvHost(["sciworld"])
    host.specs["sciworld"] = replace(host.specs["sciworld"], kwargs={"step_timeout": 1.0})
    host.create(1, "sciworld", FIND, None)
    pid = host.slots[1].env.jvm_pid
    os.kill(pid, signal.SIGSTOP)
    with pytest.raises(EnvCrashedError, match="did not answer"):
        host.step(1, "look around")
    assert 1 not in host.slots and not _alive(pid)


def test_an_idle_session_is_reaped_with_its_jvm():
    before = java_descendants(os.getpid())
    with serve_in_thread(["sciworld"], ttl=1.0) as url:
        created = httpx.post(
            f"{url}/v1/sessions", json={"env": "sciworld", "task_id": FIND}, timeout=60
        ).json()
        jvms = java_descendants(os.getpid()) - before
        assert len(jvms) == 1
        assert not wait_gone(jvms, 15)  # the reaper closed the session, the env stopped its JVM
        step = httpx.post(f"{url}/v1/sessions/{created['session_id']}/step", json={"action": "look around"})
        assert step.status_code == 404


@pytest.mark.parametrize("workers", [1, 2])
def test_killing_the_server_leaves_no_jvm(workers):
    with serve_in_process(["sciworld"], "--workers", str(workers)) as served:
        # Two sessions (one per worker with --workers 2), created at once: their JVMs start together.
        with ThreadPoolExecutor(2) as pool:
            list(
                pool.map(
                    lambda _: RemoteEnv(served.url, "sciworld").reset(options={"task_id": FIND}), range(2)
                )
            )
        jvms = java_descendants(served.proc.pid)
        assert len(jvms) == 2
        served.proc.kill()  # SIGKILL: no shutdown handler runs
        served.proc.wait(10)
        assert not wait_gone(jvms, 20), "a JVM outlived its server"


def _peak_jvms(proc: subprocess.Popen, every: float = 0.1) -> int:
    """Sample the JVMs below ``proc`` until it exits; the most seen at once."""
    peak = 0
    while proc.poll() is None:
        peak = max(peak, len(java_descendants(proc.pid)))
        time.sleep(every)
    return peak


def test_eval_holds_at_most_the_bound_of_jvms(tmp_path):
    # The default batch (64) over 6 test tasks with the bound forced to 2: two JVMs, reused in turn.
    report = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym",
            "eval",
            "--env",
            "sciworld",
            "--policy",
            "scripted",
            "--limit",
            "6",
            "--max-turns",
            "100",
            "--max-instances",
            "2",
            "-o",
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = _peak_jvms(proc)
    out = proc.stdout.read()
    assert proc.returncode == 0, out
    assert "sciworld: at most 2 instance(s)" in out
    env = json.loads(report.read_text())["envs"]["sciworld"]
    assert env["episodes"] == 6 and env["success"] == 1.0
    assert env["max_instances"] == 2 and env["instances_made"] == 2
    assert 1 <= peak <= 2


def test_a_burst_of_200_creations_leaves_the_server_up_with_at_most_the_bound_of_jvms():
    import asyncio

    # The machine's own bound (8 on 2 cores), capped so that a large machine does not start dozens.
    bound = min(8, instance_bound(get_env_spec("sciworld").cost).limit)
    with serve_in_process(["sciworld"], "--workers", "2", "--max-instances", str(bound)) as served:
        assert httpx.get(f"{served.url}/health").json()["max_instances"]["sciworld"] == bound

        async def burst() -> list[int]:
            async with httpx.AsyncClient(base_url=served.url, timeout=300) as c:
                replies = await asyncio.gather(
                    *(c.post("/v1/sessions", json={"env": "sciworld", "task_id": FIND}) for _ in range(200))
                )
                return [r.status_code for r in replies]

        statuses = asyncio.run(burst())
        assert statuses.count(200) == bound and statuses.count(503) == 200 - bound
        assert len(java_descendants(served.proc.pid)) <= bound
        health = httpx.get(f"{served.url}/health").json()
        assert health["status"] == "ok" and health["instances"] == {"sciworld": bound}
