"""The bound on env instances: computed from an env's cost and the machine, enforced by the server."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from agentgym_waiting import async_wait_until, metric, wait_until

from agentgym.resources import available_memory_mb, instance_bound
from agentgym.spec import InstanceCost


def test_bound_from_memory_and_cpu():
    cheap = InstanceCost(memory_mb=1.0)
    assert instance_bound(cheap, memory_mb=20_000, ncores=2).limit == 10_000  # half the memory
    jvm = InstanceCost(memory_mb=450.0, cpu=1.0)
    bound = instance_bound(jvm, memory_mb=23_600, ncores=2)
    assert (bound.limit, bound.by_memory, bound.by_cpu) == (8, 26, 8)  # 4 per core
    assert bound.explain() == "at most 8 instance(s) (memory allows 26, 2 core(s) allow 8)"
    assert instance_bound(jvm, memory_mb=2_000, ncores=16).limit == 2  # memory is short
    assert instance_bound(jvm, memory_mb=100, ncores=1).limit == 1  # never below one
    forced = instance_bound(jvm, override=3, memory_mb=23_600, ncores=2)
    assert forced.limit == 3 and "max-instances" in forced.explain()
    with pytest.raises(ValueError):
        instance_bound(jvm, override=0)
    assert available_memory_mb() > 0


def test_server_refuses_sessions_beyond_the_bound_with_retry_after(server):
    url = server(["guess"], max_instances=2)
    with httpx.Client(base_url=url) as c:
        health = c.get("/health").json()
        assert health["max_instances"] == {"guess": 2} and health["instances"] == {"guess": 0}
        a = c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"]
        b = c.post("/guess/create").json()["id"]  # the compatible routes count too
        full = c.post("/v1/sessions", json={"env": "guess"})
        assert full.status_code == 503 and full.json()["error"]["code"] == "at_capacity"
        assert (
            full.headers["Retry-After"] == "1" and "at most 2 instance(s)" in full.json()["error"]["message"]
        )
        assert c.post("/guess/create").status_code == 503
        assert c.get("/health").json()["instances"] == {"guess": 2}
        c.delete(f"/v1/sessions/{a}")  # its instance is kept idle, still within the bound
        health = c.get("/health").json()
        assert health["instances"] == {"guess": 2} and health["idle_instances"] == {"guess": 1}
        assert c.post("/v1/sessions", json={"env": "guess"}).status_code == 200  # reuses it
        metrics = c.get("/metrics").text
        assert (
            "agentgym_instances_started_total 2" in metrics and "agentgym_instances_reused_total 1" in metrics
        )
        c.post("/close", json={"id": b})
        assert c.get("/health").json()["idle_instances"] == {"guess": 1}


def test_idle_instances_are_closed_after_the_ttl(server):
    url = server(["guess"], ttl=0.3)
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"]
        c.delete(f"/v1/sessions/{sid}")
        assert c.get("/health").json()["idle_instances"] == {"guess": 1}
        health = wait_until(
            lambda: (h := c.get("/health").json())["idle_instances"] == {"guess": 0} and h,
            what="the idle instance to be closed",
        )
        assert health["instances"] == {"guess": 0}
        assert "agentgym_instances_dropped_total 1" in c.get("/metrics").text


def test_a_burst_of_creations_gets_the_bound_and_503s_and_the_server_stays_up(server):
    url = server(["guess", "crashy"], max_instances=3, workers=2)

    async def burst() -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            replies = await asyncio.gather(
                *(c.post("/v1/sessions", json={"env": "guess"}) for _ in range(100))
            )
            return [r.status_code for r in replies]

    statuses = asyncio.run(burst())
    assert statuses.count(200) == 3 and statuses.count(503) == 97
    with httpx.Client(base_url=url) as c:
        health = c.get("/health").json()
        assert health["status"] == "ok" and health["instances"] == {"guess": 3, "crashy": 0}
        # the bound is per env: another env still gets sessions
        assert c.post("/v1/sessions", json={"env": "crashy"}).status_code == 200


def test_a_close_racing_a_slow_step_keeps_the_count_of_held_instances_right(server, tmp_path):
    url = server(["crashy"], max_instances=1)

    async def race() -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            sid = (await c.post("/v1/sessions", json={"env": "crashy"})).json()["session_id"]

            async def close_began() -> bool:  # the close takes the session out of the table first
                return metric((await c.get("/metrics")).text, "agentgym_sessions_active") == 0

            # a step that runs until tmp_path/release is made (agentgym_testenvs: ``block``)
            slow = asyncio.create_task(
                c.post(f"/v1/sessions/{sid}/step", json={"action": f"block {tmp_path}"})
            )
            try:
                await async_wait_until((tmp_path / "started").exists, what="the slow step to start")
                close = asyncio.create_task(c.delete(f"/v1/sessions/{sid}"))
                await async_wait_until(close_began, what="the close to begin")
                again = await c.post(f"/v1/sessions/{sid}/step", json={"action": "inc"})  # closing: 404
                second = await c.delete(f"/v1/sessions/{sid}")
                assert not close.done(), "the close did not wait for the step"
            finally:
                (tmp_path / "release").touch()
            return [
                (await slow).status_code,
                (await close).status_code,
                again.status_code,
                second.status_code,
            ]

    assert asyncio.run(race()) == [200, 200, 404, 404]
    with httpx.Client(base_url=url) as c:
        health = c.get("/health").json()
        assert health["instances"] == {"crashy": 1} and health["idle_instances"] == {"crashy": 1}
        assert c.post("/v1/sessions", json={"env": "crashy"}).status_code == 200  # the kept one, reused
        assert "agentgym_instances_started_total 1" in c.get("/metrics").text
