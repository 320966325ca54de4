"""Soak: an env server under session churn neither leaks memory nor leaves processes behind.

For each env CI can run, one ``agentgym serve`` process: rounds of 64 sessions created, stepped
with the env's expert (``GET /v1/sessions/{id}/expert``, then one batched ``POST /v1/step`` for all
live sessions) and closed. The server's memory is measured after the warm-up rounds and at the end;
it may grow by at most ``MAX_GROWTH``. Each env's soak runs in at most about two minutes on 2
cores. SciWorld's instances are JVMs (~0.45 GB each): 64 at once would need 29 GB, so its 64
sessions a round come in waves over 4 reused JVMs (``--max-instances 4``), which is the churn a
bounded server sees.

Memory is the PSS (proportional set size, ``/proc/<pid>/smaps_rollup``) summed over the server's
process tree: the server, its workers, SciWorld's JVMs, Chromium and its renderers. RSS would count
every shared page (libraries, Chromium's zygote-forked renderers, copy-on-write pages of forked
workers) once per process, so the sum would grow with the number of processes even when no memory
leaks; PSS splits each shared page among the processes sharing it, so the tree's sum is what the tree
really holds.

Every process the server starts carries a tag in its environment; once the server is stopped, no
process with the tag (a JVM, a Chromium) may be left.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")

from runnable import why_not  # noqa: E402

from agentgym.server.background import serve_in_process  # noqa: E402

pytestmark = pytest.mark.slow

SESSIONS = 64  # per round
MAX_GROWTH = 0.10  # of the memory after the warm-up round
TAG = "AGENTGYM_SOAK_TAG"


@dataclass
class Plan:
    env: str
    max_instances: int  # sessions alive at once (waves of this many make up a round's 64)
    budget_s: float  # rounds after the warm-up one run until this is spent (at least one)
    max_steps: int  # expert steps per session at most
    warmup_rounds: int = 3  # before the first measurement (the allocator's arenas fill up first)


# Each env's soak must run in about 2 minutes on 2 shared cores. A SciWorld session costs ~0.5-1 s
# (a task reset in a JVM) and a WebArena one ~0.7 s (a browser context and a page load): their
# rounds take ~35 s and ~43 s, so they get one warm-up round and one measured round. A JVM's heap
# grows (up to -Xmx) over its first resets, which is not a leak but reads as one when JVMs are
# measured after a few resets each: 8 JVMs after 8 resets each grew +15% in the next round, 4 after
# 16 each +1.9%. Hence SciWorld's 4 JVMs (the server's own bound here is 8), each warmed by 16.
PLANS = [
    Plan("babyai", SESSIONS, 6, 8),
    Plan("textcraft", SESSIONS, 6, 64),
    Plan("search", SESSIONS, 6, 16),
    Plan("sciworld", 4, 0, 1, warmup_rounds=1),  # 64 sessions a round over 4 JVMs
    Plan("webarena", SESSIONS, 0, 1, warmup_rounds=1),  # 64 browser contexts at once
]


# -- processes and memory -------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def process_tree(pid: int) -> list[int]:
    children, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def pss_kb(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:  # gone meanwhile
        return 0
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:")), 0)


def tree_pss_mb(pid: int) -> tuple[float, int]:
    pids = process_tree(pid)
    return sum(pss_kb(p) for p in pids) / 1024, len(pids)


def tagged(tag: str) -> list[str]:
    """Processes (other than this one) whose environment carries ``TAG=tag``: ``pid cmdline``."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name} {cmd[:120]}")
        except OSError:
            continue
    return found


# -- churn ----------------------------------------------------------------------------------------


def _check(r: httpx.Response) -> dict:
    assert r.status_code == 200, f"{r.request.method} {r.request.url}: {r.status_code} {r.text[:300]}"
    return r.json()


def one_round(client: httpx.Client, pool: ThreadPoolExecutor, plan: Plan, task_ids: list[int], k: int) -> int:
    """``SESSIONS`` sessions, in waves of ``plan.max_instances``: created, stepped by the
    expert, closed."""
    steps = 0
    for start in range(0, SESSIONS, plan.max_instances):
        n = min(plan.max_instances, SESSIONS - start)
        ids = [task_ids[(k * SESSIONS + start + i) % len(task_ids)] for i in range(n)]
        created = pool.map(
            lambda t: _check(client.post("/v1/sessions", json={"env": plan.env, "task_id": t})), ids
        )
        live = [c["session_id"] for c in created]
        opened = list(live)
        for _ in range(plan.max_steps):
            if not live:
                break
            actions = list(pool.map(lambda s: _check(client.get(f"/v1/sessions/{s}/expert"))["action"], live))
            body = {
                "steps": [{"session_id": s, "action": a} for s, a in zip(live, actions, strict=True) if a]
            }
            if not body["steps"]:
                break
            results = _check(client.post("/v1/step", json=body))["results"]
            errors = [r for r in results if "error" in r]
            assert not errors, errors[:3]
            steps += len(results)
            live = [r["session_id"] for r in results if not (r["terminated"] or r["truncated"])]
        for s in opened:
            _check(client.delete(f"/v1/sessions/{s}"))
    return steps


# ~75-90 s alone; twice that when xdist runs the SciWorld and WebArena soaks side by side on 2 cores
@pytest.mark.timeout(600)
@pytest.mark.parametrize("plan", PLANS, ids=[p.env for p in PLANS])
def test_session_churn_does_not_grow_memory_or_leak_processes(plan: Plan):
    import agentgym

    if reason := why_not(plan.env):
        pytest.skip(reason)
    task_ids = list(agentgym.env_specs()[plan.env].splits["test"].task_ids[:SESSIONS])
    tag = uuid.uuid4().hex
    t0 = time.monotonic()
    env = {**os.environ, TAG: tag, "AGENTGYM_STEP_TIMEOUT": "120"}
    args = ("--max-instances", str(plan.max_instances), "--log-level", "error")
    with (
        serve_in_process([plan.env], *args, env=env, timeout=120) as served,
        httpx.Client(base_url=served.url, timeout=120) as client,
        ThreadPoolExecutor(8) as pool,
    ):
        started = time.monotonic() - t0
        steps = sum(one_round(client, pool, plan, task_ids, k) for k in range(plan.warmup_rounds))
        warm_mb, warm_procs = tree_pss_mb(served.proc.pid)
        rounds, t1 = plan.warmup_rounds, time.monotonic()
        while True:
            steps += one_round(client, pool, plan, task_ids, rounds)
            rounds += 1
            if time.monotonic() - t1 >= plan.budget_s:
                break
        end_mb, end_procs = tree_pss_mb(served.proc.pid)
        health = _check(client.get("/health"))
    deadline = time.monotonic() + 15
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    growth = end_mb / warm_mb - 1
    print(
        f"\nsoak {plan.env}: start {started:.1f}s, {rounds} rounds in {time.monotonic() - t0:.1f}s, "
        f"{rounds * SESSIONS} sessions ({plan.max_instances} at once), {steps} steps; PSS after "
        f"warm-up {warm_mb:.1f} MB ({warm_procs} procs), at the end {end_mb:.1f} MB ({end_procs} procs), "
        f"growth {growth:+.1%}"
    )
    assert health["sessions"] == 0
    assert rounds > plan.warmup_rounds and steps > 0
    assert growth <= MAX_GROWTH, f"{plan.env}: PSS grew {warm_mb:.1f} -> {end_mb:.1f} MB ({growth:+.1%})"
    assert not left, f"processes the {plan.env} server started outlived it: {left}"
