"""Server faults: a server killed mid-rollout, an env that raises, hangs, or kills its worker.

Each fault must cost only what it touches: the rollout finishes, the broken session is reported
with a clear JSON error, and every other session keeps being served.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import httpx
import pytest

from agentgym.server.background import serve_in_process, serve_in_thread

HERE = Path(__file__).parent


@pytest.fixture
def faulty(monkeypatch):
    """The ``faulty`` env registered (here, and in server processes through the environment)."""
    from agentgym import plugins

    monkeypatch.setenv("AGENTGYM_PLUGIN_MODULES", "faulty_envs")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    plugins.reset_registry()
    import faulty_envs

    faulty_envs.RELEASE.clear()
    yield faulty_envs
    faulty_envs.RELEASE.set()  # hung steps return, so that their server's threads can end
    plugins.reset_registry()


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(rf"^agentgym_{name} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def _create(client: httpx.Client, n: int, env: str = "faulty") -> list[int]:
    out = []
    for t in range(n):
        r = client.post("/v1/sessions", json={"env": env, "task_id": 50 + t})
        assert r.status_code == 200, r.text
        out.append(r.json()["session_id"])
    return out


def _step_all(client: httpx.Client, sids: list[int], action: str = "inc") -> list[dict]:
    r = client.post("/v1/step", json={"steps": [{"session_id": s, "action": action} for s in sids]})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def _assert_served(client: httpx.Client, sids: list[int]) -> None:
    for result in _step_all(client, sids):
        assert "error" not in result, result
        assert result["observation"].startswith("count is")


# -- a server killed mid-rollout --------------------------------------------------------------
@pytest.mark.slow
def test_rollout_survives_a_server_killed_mid_rollout(faulty):
    """SIGKILL one of two servers mid-rollout: the rollout finishes, the episodes that were on it
    are re-created on the live server by replay (none is lost or scored as a failure), new
    sessions go to the live server, and a server restarted on the same port gets sessions again."""
    from agentgym_train.policies.scripted import ScriptedPolicy
    from agentgym_train.rollout.engine import RolloutEngine, Task, rollout_metrics
    from agentgym_train.rollout.envs import RemoteEnvs

    from agentgym.plugins import get_env_spec

    with serve_in_process(["guess"]) as a, serve_in_process(["guess"]) as b:
        port_a = int(a.url.rsplit(":", 1)[1])
        backend = RemoteEnvs(get_env_spec("guess"), [a.url, b.url])
        on_a: list = []

        class KillingPolicy(ScriptedPolicy):
            calls = 0

            async def agenerate(self, requests, sampling):
                self.calls += 1
                if self.calls == 3:  # mid-episode for every episode (bisection takes ~7 turns)
                    on_a.extend(s for s in backend.pool.sessions if s.url == a.url)
                    a.proc.send_signal(signal.SIGKILL)
                    a.proc.wait(timeout=30)
                return await super().agenerate(requests, sampling)

        engine = RolloutEngine(KillingPolicy(), {"guess": backend}, batch_size=16, max_turns=20)
        tasks = [Task("guess", t) for t in range(1000, 1016)]

        async def main():
            try:
                episodes = await engine.arun(tasks)
                assert on_a, "no episode was on the killed server"
                assert len(episodes) == len(tasks)
                assert all(ep.termination == "success" for ep in episodes), [
                    (ep.task_id, ep.termination, ep.error) for ep in episodes
                ]
                assert rollout_metrics(episodes)["env_errors"] == 0
                assert all(s.url == b.url and s.restarts >= 1 for s in on_a)
                # new sessions go to the live server
                fresh = await backend.pool.open(range(1020, 1024))
                assert all(s.url == b.url and not s.failed for s in fresh)
                await backend.pool.close(fresh)
                # a server restarted on the same port is used again
                with serve_in_process(["guess"], port=port_a) as again:
                    assert again.url == a.url
                    more = await backend.pool.open(range(1030, 1036))
                    assert not any(s.failed for s in more)
                    assert {s.url for s in more} == {a.url, b.url}
                    health = httpx.get(f"{a.url}/health", timeout=10).json()
                    assert health["sessions"] == sum(s.url == a.url for s in more) > 0
                    assert _metric(a.url, "sessions_created_total") >= 1
                    await backend.pool.close(more)
            finally:
                await backend.aclose()

        asyncio.run(main())


@pytest.mark.slow
@pytest.mark.browser
def test_a_webarena_session_moves_to_the_other_server_when_its_server_dies():
    """WebArena's bundled sites listen on a port of each server process; the agent reads them under
    fixed names, so a session replayed on the other server reads the same and goes on."""
    from runnable import why_not

    from agentgym.client import AsyncEnvPool

    if reason := why_not("webarena"):
        pytest.skip(reason)
    with serve_in_process(["webarena"]) as a, serve_in_process(["webarena"]) as b:

        async def main():
            async with AsyncEnvPool([a.url, b.url], "webarena") as pool:
                s, solved = await pool.open([0, 0])  # on a and b
                assert (s.url, solved.url) == (a.url, b.url)
                actions, outcome = [], None
                while outcome is None or not outcome.terminated:  # the expert's solution, on b
                    actions.append(await pool.expert_action(solved))
                    (outcome,) = await pool.step([(solved, actions[-1])])
                assert outcome.info["success"] and len(actions) >= 3, actions
                (first,) = await pool.step([(s, actions[0])])
                assert first.error is None and "URL: http://shopping.test/" in first.observation
                a.proc.kill()
                a.proc.wait(timeout=30)
                (second,) = await pool.step([(s, actions[1])])
                assert second.error is None, second.error
                assert s.url == b.url and s.restarts == 1  # replayed there, read the same
                # the expert there (a new one) picks up where the episode is
                for _ in range(len(actions) - 2):
                    (last,) = await pool.step([(s, await pool.expert_action(s))])
                    assert last.error is None, last.error
                assert last.terminated and last.info["success"]

        asyncio.run(main())


@pytest.mark.slow
def test_episodes_whose_replay_diverges_end_in_error_and_are_not_scored(faulty):
    """Every session lost mid-rollout (closed on the server, as by idle expiry): the episodes are
    replayed and go on, except the one whose env is not deterministic (task 99), which ends
    ``termination="error"`` and is left out of the scores."""
    from agentgym_train.policies.scripted import ScriptedPolicy
    from agentgym_train.rollout.engine import RolloutEngine, Task, rollout_metrics
    from agentgym_train.rollout.envs import RemoteEnvs

    from agentgym.plugins import get_env_spec

    with serve_in_thread(["faulty"]) as url:
        backend = RemoteEnvs(get_env_spec("faulty"), [url])

        class ForgetfulServer(ScriptedPolicy):
            calls = 0

            async def agenerate(self, requests, sampling):
                self.calls += 1
                if self.calls == 2:  # after every episode's first step
                    for s in backend.pool.sessions:
                        assert httpx.delete(f"{url}/v1/sessions/{s.session_id}").status_code == 200
                return await super().agenerate(requests, sampling)

        engine = RolloutEngine(ForgetfulServer(), {"faulty": backend}, batch_size=8, max_turns=6)
        tasks = [Task("faulty", t) for t in (5, 6, 7, 9, 99)]
        try:
            episodes = engine.run(tasks)
        finally:
            asyncio.run(backend.aclose())
        by_task = {ep.task_id: ep for ep in episodes}
        assert by_task[99].termination == "error" and "diverged" in by_task[99].error
        assert all(by_task[t].termination == "success" for t in (5, 6, 7, 9))
        metrics = rollout_metrics(episodes)
        assert metrics["env_errors"] == 1 and metrics["success"] == 1.0


@pytest.mark.slow
def test_episodes_whose_env_fails_end_in_error_and_are_not_scored(faulty):
    """An env that keeps raising ends its episode ``termination="error"`` (after the pool's
    re-creations); rollout metrics leave those episodes out, the others succeed."""
    from agentgym_train.policies.scripted import ScriptedPolicy
    from agentgym_train.rollout.engine import RolloutEngine, Task, rollout_metrics
    from agentgym_train.rollout.envs import RemoteEnvs

    from agentgym.plugins import get_env_spec

    with serve_in_thread(["faulty"]) as url:
        backend = RemoteEnvs(get_env_spec("faulty"), [url])
        backend.pool.backoff = 0.01
        engine = RolloutEngine(ScriptedPolicy(), {"faulty": backend}, batch_size=8, max_turns=6)
        episodes = engine.run([Task("faulty", t) for t in range(12)])
        bad = {t for t in range(12) if t in faulty.BAD_TASKS}
        assert {ep.task_id for ep in episodes if ep.termination == "error"} == bad
        assert all(ep.termination == "success" for ep in episodes if ep.task_id not in bad)
        assert all(
            "crashed" in (ep.error or "") or "lost" in (ep.error or "")
            for ep in episodes
            if ep.task_id in bad
        )
        metrics = rollout_metrics(episodes)
        assert metrics["env_errors"] == len(bad)
        assert metrics["success"] == 1.0  # failed envs are not scored as failures
        assert httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok"


def test_a_lost_session_is_restored_only_where_its_replay_matches(faulty):
    """A session the server lost (closed behind the client's back, as by idle expiry) is re-created
    and replayed; where the env is deterministic the episode goes on, where the replay shows
    another observation than the episode saw it is marked failed (``replay_diverged``), both in
    ``AsyncEnvPool`` and in ``RemoteEnv``."""
    import agentgym
    from agentgym.client import AsyncEnvPool

    with serve_in_thread(["faulty"]) as url:

        async def main():
            async with AsyncEnvPool([url], "faulty") as pool:
                steady, drifting = await pool.open([5, 99])
                await pool.step([(steady, "inc"), (drifting, "inc")])
                for s in (steady, drifting):  # lost on the server
                    assert httpx.delete(f"{url}/v1/sessions/{s.session_id}").status_code == 200
                ok, bad = await pool.step([(steady, "inc"), (drifting, "inc")])
                assert ok.error is None and ok.observation == "count is 2" and steady.restarts == 1
                assert bad.error is not None and "diverged" in bad.error and drifting.failed
                assert (await pool.step([(drifting, "inc")]))[0].error == bad.error

        asyncio.run(main())
        for task_id, deterministic in ((5, True), (99, False)):
            env = agentgym.connect(url, "faulty")
            env.reset(options={"task_id": task_id})
            env.step("inc")
            httpx.delete(f"{url}/v1/sessions/{env.session_id}")
            if deterministic:
                assert env.step("inc")[0] == "count is 2"
            else:
                from agentgym.errors import AgentGymError

                with pytest.raises(AgentGymError) as info:
                    env.step("inc")
                assert info.value.code == "replay_diverged"
            env.close()


# -- one broken session among many ----------------------------------------------------------
def test_an_env_that_raises_breaks_only_its_session(faulty):
    with serve_in_thread(["faulty"]) as url, httpx.Client(base_url=url, timeout=30) as client:
        sids = _create(client, 5)
        broken, others = sids[0], sids[1:]
        _assert_served(client, sids)
        r = client.post(f"/v1/sessions/{broken}/step", json={"action": "raise"})
        assert r.status_code == 500
        assert r.json()["error"]["code"] == "env_crashed"
        assert "the env broke" in r.json()["error"]["message"]
        _assert_served(client, others)
        r = client.post(f"/v1/sessions/{broken}/step", json={"action": "inc"})
        assert (r.status_code, r.json()["error"]["code"]) == (404, "unknown_session")
        # in a batch: the raising item gets its own error, the others their results
        second = others[0]
        steps = [{"session_id": second, "action": "raise"}]
        steps += [{"session_id": s, "action": "inc"} for s in others[1:]]
        results = client.post("/v1/step", json={"steps": steps}).json()["results"]
        assert results[0]["error"]["code"] == "env_crashed"
        assert all(r["observation"] == "count is 3" for r in results[1:])
        assert _metric(url, "env_crashes_total") == 2
        assert httpx.get(f"{url}/health").json()["sessions"] == 3


def test_a_hanging_step_times_out_and_breaks_only_its_session(faulty, monkeypatch):
    monkeypatch.setenv("AGENTGYM_STEP_TIMEOUT", "1")
    with serve_in_thread(["faulty"]) as url, httpx.Client(base_url=url, timeout=30) as client:
        sids = _create(client, 6)
        _assert_served(client, sids)
        # single step: 504 with a declared code, the session closed
        r = client.post(f"/v1/sessions/{sids[0]}/step", json={"action": "hang"})
        assert r.status_code == 504
        assert r.json()["error"]["code"] == "step_timeout"
        assert "within 1 s" in r.json()["error"]["message"]
        r = client.post(f"/v1/sessions/{sids[0]}/step", json={"action": "inc"})
        assert r.json()["error"]["code"] == "unknown_session"
        _assert_served(client, sids[1:])
        # in a batch: the hanging item times out, the items before and after it are stepped
        steps = [{"session_id": s, "action": "inc"} for s in sids[1:]]
        steps[1]["action"] = "hang"
        results = client.post("/v1/step", json={"steps": steps}).json()["results"]
        assert results[1]["error"]["code"] == "step_timeout"
        assert [r.get("observation") for i, r in enumerate(results) if i != 1] == ["count is 3"] * 4
        assert _metric(url, "step_timeouts_total") == 2
        assert httpx.get(f"{url}/health").json()["sessions"] == 4
        # the client does not resend a step the server declared hung
        import agentgym
        from agentgym.errors import AgentGymError

        env = agentgym.connect(url, "faulty")
        env.reset(options={"task_id": 3})
        with pytest.raises(AgentGymError) as info:
            env.step("hang")
        assert info.value.code == "step_timeout"
        env.close()
        assert _metric(url, "step_timeouts_total") == 3
        fresh = _create(client, 1)
        _assert_served(client, fresh)


def test_a_cheap_env_steps_on_the_loop_and_a_hung_step_costs_only_its_session(faulty, monkeypatch):
    """An env that declares its steps cheap is stepped on the server's event loop (no thread
    hand-off); a step that hangs there (a busy loop) is interrupted past the step timeout: 504 for
    it, its session closed, the batch's other items stepped, and the server serves on."""
    monkeypatch.setenv("AGENTGYM_STEP_TIMEOUT", "1")
    with serve_in_thread(["faulty", "faulty-cheap"]) as url, httpx.Client(base_url=url, timeout=30) as client:
        cheap, other = _create(client, 5, "faulty-cheap"), _create(client, 1, "faulty")
        [where] = _step_all(client, cheap[:1], "where")
        [where_other] = _step_all(client, other, "where")
        assert where_other["observation"].startswith("agentgym-env-")  # the pool's threads
        assert not where["observation"].startswith("agentgym-env-")  # the loop's own thread
        steps = [{"session_id": s, "action": "loop" if s == cheap[2] else "inc"} for s in cheap]
        results = client.post("/v1/step", json={"steps": steps}).json()["results"]
        assert results[2]["error"]["code"] == "step_timeout"
        assert "within 1 s" in results[2]["error"]["message"]
        assert [r.get("observation") for i, r in enumerate(results) if i != 2] == ["count is 1"] * 4
        assert _metric(url, "step_timeouts_total") == 1
        r = client.post(f"/v1/sessions/{cheap[2]}/step", json={"action": "inc"})
        assert r.json()["error"]["code"] == "unknown_session"
        live = [s for s in cheap if s != cheap[2]]
        for _ in range(2):
            _step_all(client, live)  # the others finish their episodes
        assert httpx.get(f"{url}/health").json()["sessions"] == 5
        fresh = _create(client, 1, "faulty-cheap")
        _assert_served(client, fresh)


@pytest.mark.slow
def test_an_env_that_kills_its_worker_loses_only_that_workers_sessions(faulty):
    """With ``--workers 2`` a session lives in a worker process: ``os._exit`` in its step takes that
    worker (and the sessions on it) down; it is restarted, the other worker's sessions go on."""
    with serve_in_thread(["faulty"], workers=2) as url, httpx.Client(base_url=url, timeout=60) as client:
        sids = _create(client, 4)  # placed least-loaded first: workers 0, 1, 0, 1
        _assert_served(client, sids)
        doomed, same_worker, other_worker = sids[0], [sids[2]], [sids[1], sids[3]]
        r = client.post(f"/v1/sessions/{doomed}/step", json={"action": "die"})
        assert r.status_code == 500
        assert r.json()["error"]["code"] == "env_crashed"
        assert "worker" in r.json()["error"]["message"]
        _assert_served(client, other_worker)
        lost = _step_all(client, same_worker)
        assert lost[0]["error"]["code"] == "unknown_session"
        # the worker was restarted: new sessions are served on both workers again
        fresh = _create(client, 2)
        _assert_served(client, fresh)
        assert httpx.get(f"{url}/health").json()["sessions"] == 4
        assert _metric(url, "lost_sessions_total") >= 1


def test_a_step_queued_behind_hung_ones_is_answered_at_the_timeout(faulty):
    """In-process, with the only env thread held by a hung step, a step waiting for a thread is
    answered 504 at the step timeout (its time in the queue counts), not left waiting for a thread
    the hung step holds for ``HANG_S``. Both steps hang, so whichever gets the thread first, each
    must be answered long before that (the client gives up at a third of it)."""
    import concurrent.futures

    with (
        serve_in_thread(["faulty"], step_timeout=1.0, threads=1) as url,
        httpx.Client(base_url=url, timeout=faulty.HANG_S / 3) as client,
    ):
        sids = _create(client, 2)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            calls = [
                pool.submit(client.post, f"/v1/sessions/{s}/step", json={"action": "hang"}) for s in sids
            ]
            answers = [call.result() for call in calls]
        assert [r.json()["error"]["code"] for r in answers] == ["step_timeout"] * 2
        assert not faulty.RELEASE.is_set()


@pytest.mark.slow
def test_a_hanging_step_in_a_worker_breaks_only_its_session(faulty):
    """``agentgym serve --workers 2 --step-timeout 2``: a worker watches its own steps. A hung step
    is answered 504 and only its session closed; the sessions on the same worker keep being
    served, in a batch too (the items before and after the hung one are stepped). A batch of steps
    that are each in time but together run longer than the server's patience with a silent worker
    is not taken for a hang."""
    from agentgym.server.watchdog import silence_limit

    with (
        serve_in_process(["faulty"], "--workers", "2", "--step-timeout", "2") as served,
        httpx.Client(base_url=served.url, timeout=60) as client,
    ):
        url = served.url
        assert client.get("/health").json()["step_timeout"] == 2.0
        sids = _create(client, 14)  # placed least-loaded first: workers 0, 1, 0, 1, ...
        worker0, worker1 = sids[0::2], sids[1::2]
        _assert_served(client, sids)
        r = client.post(f"/v1/sessions/{worker0[0]}/step", json={"action": "hang"})
        assert r.status_code == 504, r.text
        assert r.json()["error"]["code"] == "step_timeout"
        assert "within 2 s" in r.json()["error"]["message"]
        r = client.post(f"/v1/sessions/{worker0[0]}/step", json={"action": "inc"})
        assert r.json()["error"]["code"] == "unknown_session"
        # in a batch: the hung item of worker 0 times out; worker 0's other items, before and
        # after it, and worker 1's are stepped
        live = worker0[1:] + worker1
        hung = worker0[3]
        steps = [{"session_id": s, "action": "hang" if s == hung else "inc"} for s in live]
        results = client.post("/v1/step", json={"steps": steps}).json()["results"]
        by_sid = dict(zip(live, results, strict=True))
        assert by_sid.pop(hung)["error"]["code"] == "step_timeout"
        assert all(r.get("observation") == "count is 2" for r in by_sid.values()), by_sid
        assert _metric(url, "step_timeouts_total") == 2
        assert _metric(url, "lost_sessions_total") == 0  # no worker was restarted
        assert client.get("/health").json()["sessions"] == 12
        # worker 0's 5 sessions, each 1 s slow (in time), in one call: longer than its patience
        slow = [s for s in worker0 if s in by_sid]
        assert len(slow) * faulty.SLOW_S > silence_limit(2.0)
        steps = [{"session_id": s, "action": "slow"} for s in slow]
        results = client.post("/v1/step", json={"steps": steps}).json()["results"]
        assert [r.get("observation") for r in results] == ["count is 3"] * len(slow), results
        assert _metric(url, "step_timeouts_total") == 2
        assert _metric(url, "lost_sessions_total") == 0


@pytest.mark.slow
def test_a_worker_hung_holding_the_gil_is_restarted(faulty):
    """A step that hangs without ever releasing the GIL stops the worker's watchdog too: the
    server hears nothing from that worker past the timeout plus a grace, kills and restarts it
    (its sessions are lost, as when it dies); the other worker's sessions go on."""
    with (
        serve_in_process(["faulty"], "--workers", "2", "--step-timeout", "1") as served,
        httpx.Client(base_url=served.url, timeout=60) as client,
    ):
        sids = _create(client, 4)  # workers 0, 1, 0, 1
        _assert_served(client, sids)
        r = client.post(f"/v1/sessions/{sids[0]}/step", json={"action": "spin"})
        assert r.status_code == 504, r.text
        assert r.json()["error"]["code"] == "step_timeout"
        _assert_served(client, [sids[1], sids[3]])
        assert _step_all(client, [sids[2]])[0]["error"]["code"] == "unknown_session"
        fresh = _create(client, 2)
        _assert_served(client, fresh)
        assert _metric(served.url, "step_timeouts_total") == 1
        assert _metric(served.url, "lost_sessions_total") >= 1


def test_an_abandoned_session_closes_its_env_however_its_call_ends(faulty):
    """A session given up at the step timeout holds an env instance: it is closed when the hung
    call returns, at once when the call had already returned (the timeout raced with it), and by
    a call that was waiting for the session when it was given up. Never twice."""
    import threading

    from agentgym.server.host import EnvHost

    host = EnvHost(["faulty"])
    closes: list[int] = []

    def session(sid: int):
        host.create(sid, "faulty", 1, None)
        slot = host.slots[sid]
        real_close = slot.env.close
        slot.env.close = lambda: (closes.append(sid), real_close())
        return slot

    # the call had returned: closed by abandon itself
    session(1)
    host.abandon(1)
    assert closes == [1]
    # the call hangs: closed when it returns
    session(2)
    stepping = threading.Thread(target=host.step, args=(2, "hang"))
    stepping.start()
    while not host.slots[2].lock.locked():
        pass
    host.abandon(2)
    assert closes == [1]
    faulty.RELEASE.set()
    stepping.join(timeout=30)
    assert closes == [1, 2]
    # a call waiting for the session's lock when it was given up closes it
    faulty.RELEASE.clear()
    slot = session(3)
    from agentgym.errors import UnknownSessionError

    def step_given_up() -> None:
        with pytest.raises(UnknownSessionError):
            host.step(3, "inc")

    with slot.lock:  # another call holds the session
        waiting = threading.Thread(target=step_given_up)
        waiting.start()
        host.abandon(3)
        assert closes == [1, 2]
    waiting.join(timeout=30)
    assert closes == [1, 2, 3]
