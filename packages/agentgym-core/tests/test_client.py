"""RemoteEnv and AsyncEnvPool against real servers on loopback."""

from __future__ import annotations

import asyncio

import httpx
import pytest

import agentgym
from agentgym.client import AsyncEnvPool
from agentgym.errors import EpisodeOverError, ServerUnavailableError
from agentgym.server.background import serve_in_thread
from agentgym_guess.expert import BisectExpert


def _play(env, task_id, expert_factory=BisectExpert):
    observation, info = env.reset(options={"task_id": task_id})
    expert, trace = expert_factory(), [observation]
    while True:
        observation, reward, terminated, truncated, info = env.step(expert(observation, info))
        trace.append((observation, reward, terminated, truncated, info["success"]))
        if terminated or truncated:
            return trace


def test_connect_plays_exactly_like_make(server):
    url = server(["guess"])
    remote = agentgym.connect(url, "guess")
    try:
        for task_id in (0, 1001, 1002):
            assert _play(remote, task_id) == _play(agentgym.make("guess"), task_id)
        with pytest.raises(EpisodeOverError):
            remote.step("guess 1")
        assert remote.specs()[0]["name"] == "guess"
    finally:
        remote.close()


def test_remote_env_recreates_a_lost_session_by_replay(server):
    url = server(["guess"])
    local, remote = agentgym.make("guess"), agentgym.connect(url, "guess")
    try:
        for env in (local, remote):
            env.reset(options={"task_id": 1005})
            env.step("guess 500")
        # The server loses the session (restart, TTL expiry...): simulate by deleting it.
        httpx.delete(f"{url}/v1/sessions/{remote.session_id}")
        assert remote.step("guess 250") == local.step("guess 250")
    finally:
        remote.close()


def test_remote_env_reports_an_unreachable_server_clearly(registry):
    from agentgym.server.background import free_port

    env = agentgym.connect(f"http://127.0.0.1:{free_port()}", "guess", retries=1, backoff=0.01)
    with pytest.raises(ServerUnavailableError, match="unreachable"):
        env.reset(options={"task_id": 0})


async def _run_pool(pool, task_ids, on_turn=None):
    sessions = await pool.open(task_ids)
    experts = {id(s): BisectExpert() for s in sessions}
    active, turn = [s for s in sessions if not s.failed], 0
    outcomes = {}
    while active:
        turn += 1
        if on_turn is not None:
            on_turn(turn)
        pairs = [(s, experts[id(s)](s.observation, s.info)) for s in active]
        results = await pool.step(pairs)
        still = []
        for (s, _), out in zip(pairs, results, strict=True):
            if out.error or out.terminated or out.truncated:
                outcomes[id(s)] = out
            else:
                still.append(s)
        active = still
    return sessions, outcomes


def test_pool_runs_many_sessions_over_two_servers(registry):
    with serve_in_thread(["guess"]) as a, serve_in_thread(["guess"]) as b:

        async def main():
            async with AsyncEnvPool([a, b], "guess") as pool:
                sessions, outcomes = await _run_pool(pool, range(1000, 1016))
                assert {s.url for s in sessions} == {a, b}
                assert all(outcomes[id(s)].info["success"] for s in sessions)
                assert all(o.error is None for o in outcomes.values())

        asyncio.run(main())


def test_pool_survives_a_server_going_away(registry):
    """Sessions on a server that dies mid-episode are re-created on the other one by replay."""
    with serve_in_thread(["guess"]) as stable:
        doomed_cm = serve_in_thread(["guess"])
        doomed = doomed_cm.__enter__()

        def kill_after_first_turn(turn):
            if turn == 2:
                doomed_cm.__exit__(None, None, None)

        async def main():
            async with AsyncEnvPool([doomed, stable], "guess", retries=1, backoff=0.01) as pool:
                sessions, outcomes = await _run_pool(pool, range(1000, 1008), on_turn=kill_after_first_turn)
                assert any(s.restarts for s in sessions), "no session was on the doomed server"
                assert all(s.url == stable for s in sessions)
                assert all(outcomes[id(s)].info["success"] for s in sessions)

        asyncio.run(main())


def test_pool_marks_episodes_failed_when_no_server_is_left(registry):
    cm = serve_in_thread(["guess"])
    url = cm.__enter__()

    async def main():
        async with AsyncEnvPool([url], "guess", retries=1, backoff=0.01) as pool:
            sessions = await pool.open([1000, 1001])
            cm.__exit__(None, None, None)
            outcomes = await pool.step([(s, "guess 1") for s in sessions])
            assert all(o.error for o in outcomes)
            assert all(s.failed for s in sessions)
            # A failed session stays failed: no exception, just the error again.
            again = await pool.step([(sessions[0], "guess 2")])
            assert again[0].error == sessions[0].error

    asyncio.run(main())


def test_pool_gives_up_on_an_env_that_keeps_crashing(server):
    url = server(["crashy"])

    async def main():
        async with AsyncEnvPool(url, "crashy") as pool:
            ok, bad = await pool.open([0, 1])
            outs = await pool.step([(ok, "inc"), (bad, "crash")])
            assert outs[0].error is None and outs[0].observation == "count is 1"
            assert outs[1].error and "boom" in outs[1].error
            assert bad.failed and not ok.failed

    asyncio.run(main())


def test_a_step_that_may_have_reached_the_server_is_not_resent(registry):
    """A read timeout after sending a step must not apply the action twice."""
    sent = []

    def handler(request):
        sent.append(request.url.path)
        if request.url.path.endswith("/step"):
            raise httpx.ReadTimeout("no answer", request=request)
        return httpx.Response(200, json={"session_id": 1, "observation": "hi", "info": {"task_id": 0}})

    env = agentgym.connect("http://127.0.0.1:9", "guess", retries=3, backoff=0.001)
    env.client = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    env.reset(options={"task_id": 0})
    with pytest.raises(ServerUnavailableError):
        env.step("guess 5")
    assert sent == ["/v1/sessions", "/v1/sessions/1/step"]
