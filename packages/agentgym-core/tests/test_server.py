"""The HTTP server, for real: uvicorn on loopback, plain httpx requests."""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
import pytest
from agentgym_waiting import server_metric, wait_until

from agentgym.server.run import check_bind, is_loopback


def _err(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    return body["error"]["message"]


def test_v1_session_lifecycle(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        envs = {e["name"]: e for e in c.get("/v1/envs").json()["envs"]}
        assert set(envs) == {"guess", "crashy"}
        assert envs["guess"]["splits"]["test"]["size"] == 100
        r = c.post("/v1/sessions", json={"env": "guess", "task_id": 5}).json()
        sid = r["session_id"]
        assert "between 1 and" in r["observation"] and r["info"]["task_id"] == 5
        step = c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}).json()
        assert set(step) >= {"observation", "reward", "terminated", "truncated", "info"}
        assert c.get(f"/v1/sessions/{sid}/observation").json()["observation"] == step["observation"]
        reset = c.post(f"/v1/sessions/{sid}/reset", json={"task_id": 6}).json()
        assert reset["info"]["task_id"] == 6
        assert c.delete(f"/v1/sessions/{sid}").status_code == 200
        _err(c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}), 404, "unknown_session")


def test_batched_step_reports_errors_per_item(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        a = c.post("/v1/sessions", json={"env": "guess", "task_id": 1}).json()["session_id"]
        b = c.post("/v1/sessions", json={"env": "guess", "task_id": 2}).json()["session_id"]
        body = {
            "steps": [
                {"session_id": a, "action": "guess 5"},
                {"session_id": 999_999, "action": "guess 5"},
                {"session_id": b, "action": "x" * (1 << 20)},
                {"session_id": b, "action": "guess 3"},
            ]
        }
        results = c.post("/v1/step", json=body).json()["results"]
        assert [r["session_id"] for r in results] == [a, 999_999, b, b]
        assert "observation" in results[0] and "error" not in results[0]
        assert results[1]["error"]["code"] == "unknown_session"
        # an over-long action is an observation, as in-process, not an error
        assert results[2]["info"]["valid_action"] is False and "too long" in results[2]["observation"]
        assert "observation" in results[3]


def test_agentgym_compatible_routes_play_an_episode(server):
    """A client that knows only AgentGym's routes and field names plays guess to the end."""
    url = server(["guess"])
    with httpx.Client(base_url=url) as c:
        env_id = c.post("/create").json()["id"]
        assert isinstance(env_id, int)
        first = c.post("/reset", json={"id": env_id, "data_idx": 1003}).json()
        lo, hi = 1, int(re.search(r"between 1 and (\d+)", first["observation"]).group(1))
        done, turns, result = False, 0, None
        while not done:
            guess = (lo + hi) // 2
            result = c.post("/step", json={"id": env_id, "action": f"guess {guess}"}).json()
            assert set(result) >= {"observation", "reward", "score", "done"}
            if "higher" in result["observation"]:
                lo = guess + 1
            elif "lower" in result["observation"]:
                hi = guess - 1
            done, turns = result["done"], turns + 1
            assert turns <= 12
        assert result["score"] == 1.0 and "Correct" in result["observation"]
        assert c.get("/observation", params={"id": env_id}).json() == result["observation"]
        assert c.post("/close", json={"id": env_id}).status_code == 200
        _err(c.post("/step", json={"id": env_id, "action": "guess 1"}), 404, "unknown_session")


def test_compat_create_needs_env_when_several_are_served(server):
    url = server(["guess", "crashy"])
    with httpx.Client(base_url=url) as c:
        assert "served" in _err(c.post("/create"), 422, "bad_request")
        assert isinstance(c.post("/guess/create").json()["id"], int)
        assert isinstance(c.post("/create", json={"env": "crashy"}).json()["id"], int)


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        (
            "POST",
            "/v1/sessions",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            422,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/sessions",
            {"content": b'{"env": "\xff\xfe"}', "headers": {"content-type": "application/json"}},
            422,
            None,
        ),
        ("POST", "/v1/sessions", {"json": {"env": "nope"}}, 404, "unknown_env"),
        ("POST", "/v1/sessions", {"json": {"env": "guess", "task_id": -1}}, 422, "invalid_request"),
        ("POST", "/v1/sessions", {"json": {"env": "guess", "task_id": "seven"}}, 422, "invalid_request"),
        ("POST", "/v1/sessions", {"json": {"env": "guess", "bogus": 1}}, 422, "invalid_request"),
        ("POST", "/v1/sessions/12345/step", {"json": {"action": "guess 1"}}, 404, "unknown_session"),
        ("POST", "/v1/step", {"json": {"steps": "many"}}, 422, "invalid_request"),
        ("GET", "/no/such/route", {}, 404, "not_found"),
        ("DELETE", "/v1/envs", {}, 405, "method_not_allowed"),
    ],
)
def test_bad_requests_get_json_errors_and_the_server_keeps_serving(
    server, method, path, kwargs, status, code
):
    url = server()
    with httpx.Client(base_url=url) as c:
        other = c.post("/v1/sessions", json={"env": "guess", "task_id": 3}).json()
        r = c.request(method, path, **kwargs)
        assert r.status_code == status, r.text
        body = r.json()
        assert set(body) == {"error"} and body["error"]["message"]
        if code:
            assert body["error"]["code"] == code
        # The server still serves, and the other session is untouched.
        step = c.post(f"/v1/sessions/{other['session_id']}/step", json={"action": "guess 1"})
        assert step.status_code == 200 and "observation" in step.json()


def test_megabyte_action_is_answered_as_in_process_without_harming_the_session(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "guess", "task_id": 0}).json()["session_id"]
        r = c.post(f"/v1/sessions/{sid}/step", json={"action": "guess " + "9" * (1 << 20)})
        assert r.status_code == 200, r.text
        assert r.json()["info"]["valid_action"] is False and "65536" in r.json()["observation"]
        assert not r.json()["terminated"]
        ok = c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 5"}).json()
        assert "guesses left" in ok["observation"] or "Correct" in ok["observation"]


def test_step_after_episode_end_is_409(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "crashy", "task_id": 0}).json()["session_id"]
        for _ in range(3):
            last = c.post(f"/v1/sessions/{sid}/step", json={"action": "inc"}).json()
        assert last["terminated"] and last["info"]["success"]
        _err(c.post(f"/v1/sessions/{sid}/step", json={"action": "inc"}), 409, "episode_over")
        c.post(f"/v1/sessions/{sid}/reset", json={"task_id": 1})
        assert c.post(f"/v1/sessions/{sid}/step", json={"action": "inc"}).status_code == 200


def test_invalid_action_is_an_observation_not_an_error(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "guess", "task_id": 0}).json()["session_id"]
        r = c.post(f"/v1/sessions/{sid}/step", json={"action": "jump around"})
        assert r.status_code == 200
        assert r.json()["info"]["valid_action"] is False and "Valid actions" in r.json()["observation"]


def test_bearer_token(server):
    url = server(token="s3cret")
    with httpx.Client(base_url=url) as c:
        _err(c.get("/v1/envs"), 401, "unauthorized")
        r = c.get("/v1/envs", headers={"Authorization": "Bearer wrong"})
        assert "wrong" in _err(r, 401, "unauthorized") and r.headers["www-authenticate"] == "Bearer"
        assert c.get("/v1/envs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/health").json()["status"] == "ok"


def test_capacity_gives_503(server):
    url = server(capacity=2)
    with httpx.Client(base_url=url) as c:
        ids = [c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"] for _ in range(2)]
        _err(c.post("/v1/sessions", json={"env": "guess"}), 503, "at_capacity")
        c.delete(f"/v1/sessions/{ids[0]}")
        assert c.post("/v1/sessions", json={"env": "guess"}).status_code == 200


def _expired(c: httpx.Client) -> float | None:
    return server_metric(c, "agentgym_sessions_expired_total")


def test_idle_sessions_expire(server):
    url = server(ttl=0.3)
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"]
        # /metrics touches no session: the session idles until the reaper closes it
        assert wait_until(lambda: _expired(c), what="the idle session to expire") == 1
        _err(c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}), 404, "unknown_session")


def test_compat_sessions_outlive_the_idle_ttl_unless_compat_ttl_says_so(server):
    # Original AgentGym servers never expire a session and their clients cannot recover one.
    url = server(ttl=0.3)
    with httpx.Client(base_url=url) as c:
        compat_id = c.post("/guess/create").json()["id"]
        v1 = c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"]
        # the compat session, made first, has idled at least as long as the v1 one when that expires
        assert wait_until(lambda: _expired(c), what="the idle v1 session to expire") == 1
        _err(c.post(f"/v1/sessions/{v1}/step", json={"action": "guess 1"}), 404, "unknown_session")
        step = c.post("/step", json={"id": compat_id, "action": "guess 1"})
        assert step.status_code == 200 and "observation" in step.json()
    url = server(ttl=60, compat_ttl=0.3)
    with httpx.Client(base_url=url) as c:
        compat_id = c.post("/guess/create").json()["id"]
        assert wait_until(lambda: _expired(c), what="the idle compat session to expire") == 1
        _err(c.post("/step", json={"id": compat_id, "action": "guess 1"}), 404, "unknown_session")


def test_an_idle_compat_session_makes_room_when_a_creation_finds_none(server, monkeypatch):
    from agentgym.server.sessions import SessionManager

    monkeypatch.setattr(SessionManager, "COMPAT_EVICT_IDLE", 0.5)
    url = server(["guess"], max_instances=1)
    with httpx.Client(base_url=url) as c:
        made = time.monotonic()
        old = c.post("/create").json()["id"]  # an original client that never closes
        _err(c.post("/v1/sessions", json={"env": "guess"}), 503, "at_capacity")  # still in use

        def create() -> httpx.Response | None:
            r = c.post("/v1/sessions", json={"env": "guess"})
            if r.status_code == 503:  # not idle long enough yet: a refusal leaves the old one alone
                assert r.json()["error"]["code"] == "at_capacity", r.text
                return None
            return r

        new = wait_until(create, what="a creation to evict the idle compat session")
        assert new.status_code == 200, new.text
        assert time.monotonic() - made >= SessionManager.COMPAT_EVICT_IDLE  # only once idle that long
        _err(c.post("/step", json={"id": old, "action": "guess 1"}), 404, "unknown_session")
        assert "agentgym_sessions_evicted_total 1" in c.get("/metrics").text


def test_compat_banner_create_observation_and_sessions_kept_to_their_env(server):
    url = server(["guess", "crashy"])
    with httpx.Client(base_url=url) as c:
        assert c.get("/").json() == "This is environment Guess, Crashy."
        created = c.post("/guess/create").json()
        # Like the original TextCraft server, /create resets the new env and returns its observation.
        assert (
            set(created) >= {"id", "observation", "reward", "done"}
            and "between 1 and" in created["observation"]
        )
        assert created["done"] is False and created["reward"] == 0
        sid = created["id"]
        message = _err(c.post("/crashy/reset", json={"id": sid, "data_idx": 0}), 404, "unknown_session")
        assert "'guess' session" in message
        _err(c.post("/crashy/step", json={"id": sid, "action": "inc"}), 404, "unknown_session")
        _err(c.get("/crashy/observation", params={"id": sid}), 404, "unknown_session")
        assert c.post("/guess/reset", json={"id": sid, "data_idx": 1000}).status_code == 200
        assert c.post("/reset", json={"id": sid, "data_idx": 1001}).status_code == 200  # unprefixed: any env
        _err(c.post("/nope/create"), 404, "unknown_env")
        assert "env name" in _err(c.post("/create", json={"env": ["guess"]}), 422, "bad_request")


def test_crashing_env_is_reported_and_cleaned_up(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        bad = c.post("/v1/sessions", json={"env": "crashy"}).json()["session_id"]
        good = c.post("/v1/sessions", json={"env": "crashy"}).json()["session_id"]
        assert "boom" in _err(
            c.post(f"/v1/sessions/{bad}/step", json={"action": "crash"}), 500, "env_crashed"
        )
        _err(c.post(f"/v1/sessions/{bad}/step", json={"action": "inc"}), 404, "unknown_session")
        assert (
            c.post(f"/v1/sessions/{good}/step", json={"action": "inc"}).json()["observation"] == "count is 1"
        )
        assert "agentgym_env_crashes_total 1" in c.get("/metrics").text


@pytest.mark.slow
def test_workers_shard_sessions_and_survive_a_dead_worker(server):
    url = server(workers=2)
    with httpx.Client(base_url=url, timeout=60) as c:
        ids = [
            c.post("/v1/sessions", json={"env": "crashy", "task_id": i}).json()["session_id"]
            for i in range(4)
        ]
        metrics = c.get("/metrics").text
        assert 'agentgym_worker_sessions{worker="0"} 2' in metrics
        assert 'agentgym_worker_sessions{worker="1"} 2' in metrics
        results = c.post(
            "/v1/step", json={"steps": [{"session_id": i, "action": "inc"} for i in ids]}
        ).json()["results"]
        assert [r["observation"] for r in results] == ["count is 1"] * 4
        # Kill the process hosting ids[0]: its shard's sessions are lost, the others keep going.
        _err(c.post(f"/v1/sessions/{ids[0]}/step", json={"action": "die"}), 500, "env_crashed")
        # The dead worker's other session is forgotten at once, not left to count against capacity.
        assert c.get("/health").json()["sessions"] == 2
        survivors = [
            i for i in ids if c.post(f"/v1/sessions/{i}/step", json={"action": "inc"}).status_code == 200
        ]
        assert len(survivors) == 2
        new = c.post("/v1/sessions", json={"env": "crashy"}).json()["session_id"]
        assert (
            c.post(f"/v1/sessions/{new}/step", json={"action": "inc"}).json()["observation"] == "count is 1"
        )


def test_expert_and_render_routes(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "guess", "task_id": 1001}).json()["session_id"]
        action = c.get(f"/v1/sessions/{sid}/expert").json()["action"]
        assert re.fullmatch(r"guess \d+", action)
        _err(c.get(f"/v1/sessions/{sid}/render"), 404, "no_render")


def test_health_and_metrics(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        c.post("/v1/sessions", json={"env": "guess"})
        health = c.get("/health").json()
        assert health["status"] == "ok" and health["sessions"] == 1
        assert health["protocol"] == {"version": "1.1", "features": ["autoreset", "session_tasks"]}
        text = c.get("/metrics").text
        assert "agentgym_sessions_active 1" in text and "agentgym_sessions_created_total 1" in text
        assert c.get("/openapi.json").json()["info"]["title"] == "AgentGym env server"


def test_bind_policy():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0")
    check_bind("127.0.0.1", None, False)
    check_bind("0.0.0.0", "tok", False)
    check_bind("0.0.0.0", None, True)
    with pytest.raises(Exception, match="--token"):
        check_bind("0.0.0.0", None, False)


def test_batched_expert_answers_each_session_in_order(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        a = c.post("/v1/sessions", json={"env": "guess", "task_id": 1}).json()["session_id"]
        b = c.post("/v1/sessions", json={"env": "guess", "task_id": 2}).json()["session_id"]
        results = c.post("/v1/expert", json={"session_ids": [a, 999_999, b]}).json()["results"]
        assert results[0] == {"action": c.get(f"/v1/sessions/{a}/expert").json()["action"]}
        assert results[1]["error"]["code"] == "unknown_session"
        assert results[2] == {"action": c.get(f"/v1/sessions/{b}/expert").json()["action"]}
        _err(c.post("/v1/expert", json={"session_ids": "all"}), 422, "invalid_request")


def test_the_pool_asks_the_expert_of_many_sessions_in_one_request(server):
    from agentgym.client import AsyncEnvPool

    url = server()

    def served() -> int:  # requests the server has answered, from /metrics
        text = httpx.get(f"{url}/metrics").text
        return int(re.search(r"^agentgym_requests_total (\d+)", text, re.M).group(1))

    async def main() -> list[str]:
        async with AsyncEnvPool([url], "guess") as pool:
            sessions = await pool.open(list(range(6)))
            before = served()
            actions = await asyncio.gather(*(pool.expert_action(s) for s in sessions))
            assert served() - before <= 2  # the first /metrics and one POST /v1/expert, not six GETs
            return actions

    assert all(a.startswith("guess ") for a in asyncio.run(main()))


def test_batched_reset(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        a = c.post("/v1/sessions", json={"env": "guess", "task_id": 1}).json()["session_id"]
        b = c.post("/v1/sessions", json={"env": "guess", "task_id": 2}).json()["session_id"]
        body = {
            "resets": [
                {"session_id": a, "task_id": 1004},
                {"session_id": 424242},
                {"session_id": b, "task_id": 1005},
            ]
        }
        results = c.post("/v1/reset", json=body).json()["results"]
        assert [r["session_id"] for r in results] == [a, 424242, b]
        assert results[0]["info"]["task_id"] == 1004 and results[2]["info"]["task_id"] == 1005
        assert results[1]["error"]["code"] == "unknown_session"


@pytest.mark.slow
def test_concurrent_creations_spread_over_workers(server):
    import asyncio

    from agentgym.client import AsyncEnvPool

    url = server(["guess"], workers=2)

    async def main():
        async with AsyncEnvPool(url, "guess") as pool:
            await pool.open(range(1000, 1012))  # concurrent creations
            metrics = httpx.get(f"{url}/metrics").text
            assert 'agentgym_worker_sessions{worker="0"} 6' in metrics
            assert 'agentgym_worker_sessions{worker="1"} 6' in metrics

    asyncio.run(main())


def test_bad_seed_is_422_and_keeps_the_session(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "guess", "task_id": 3}).json()["session_id"]
        _err(c.post(f"/v1/sessions/{sid}/reset", json={"task_id": 3, "seed": -5}), 422, "invalid_request")
        assert c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}).status_code == 200


def test_lone_surrogate_action_is_rejected_per_item(server):
    url = server()
    with httpx.Client(base_url=url) as c:
        a = c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"]
        b = c.post("/v1/sessions", json={"env": "guess"}).json()["session_id"]
        # JSON's \ud800 escape decodes to a lone surrogate: valid JSON, not valid text.
        steps = [{"session_id": a, "action": "guess LONE"}, {"session_id": b, "action": "guess 1"}]
        raw = json.dumps({"steps": steps}).replace("LONE", "\\ud800")
        r = c.post("/v1/step", content=raw.encode(), headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        first, second = r.json()["results"]
        assert first["error"]["code"] == "invalid_action_text" and "observation" in second


def test_closing_a_session_waits_for_its_running_step(server, tmp_path):
    import threading

    url = server()
    with httpx.Client(base_url=url, timeout=30) as c:
        sid = c.post("/v1/sessions", json={"env": "crashy"}).json()["session_id"]
        out = {}

        def step():  # runs until the test makes tmp_path/release (agentgym_testenvs: ``block``)
            out["step"] = httpx.post(
                f"{url}/v1/sessions/{sid}/step", json={"action": f"block {tmp_path}"}, timeout=30
            )

        def close():
            out["close"] = httpx.delete(f"{url}/v1/sessions/{sid}", timeout=30)

        stepping, closing = threading.Thread(target=step), threading.Thread(target=close)
        stepping.start()
        try:
            wait_until((tmp_path / "started").exists, what="the step to start")
            closing.start()
            # the close takes the session out of the table first, then waits for the step
            wait_until(lambda: server_metric(c, "agentgym_sessions_active") == 0, what="the close to begin")
            assert closing.is_alive() and "close" not in out, "the close did not wait for the step"
        finally:
            (tmp_path / "release").touch()
            stepping.join(30)
            if closing.ident is not None:
                closing.join(30)
        assert out["step"].status_code == 200 and out["step"].json()["observation"] == "released"
        assert out["close"].status_code == 200
        assert "agentgym_env_crashes_total" not in c.get("/metrics").text


def test_the_batch_fast_path_takes_plain_bodies_only_and_leaves_the_rest_to_the_route(server):
    from agentgym.server.fastpath import parse_resets, parse_steps
    from agentgym.server.messages import NEXT_TASK, ResetTo, StepItem
    from agentgym.server.routes import MAX_BATCH

    steps = [{"session_id": 1, "action": "go"}, {"session_id": 2, "action": "a", "autoreset": True},
             {"session_id": 3, "action": "b", "autoreset": {"task_id": 4}}]  # fmt: skip
    assert parse_steps({"steps": steps}) == [
        StepItem(1, "go"),
        StepItem(2, "a", NEXT_TASK),
        StepItem(3, "b", ResetTo(4, None)),
    ]
    assert parse_resets({"resets": [{"session_id": 1}, {"session_id": 2, "task_id": 3, "seed": 0}]}) == [
        (1, None, None),
        (2, 3, 0),
    ]
    assert parse_steps({"steps": []}) == [] and parse_resets({"resets": []}) == []
    odd_steps = [[], {"steps": {}}, {"steps": [], "x": 1}, {"steps": [1]}, {"steps": [{"session_id": "1", "action": "a"}]},
                 {"steps": [{"session_id": True, "action": "a"}]}, {"steps": [{"session_id": 1}]},
                 {"steps": [{"session_id": 1, "action": "a"}] * (MAX_BATCH + 1)}]  # fmt: skip
    odd_resets = [{"resets": [{"session_id": 1, "task_id": -1}]}, {"resets": [{"session_id": 1, "seed": 1.0}]},
                  {"resets": [{"task_id": 1}]}, {"resets": [{"session_id": 1, "task_id": True}]}, {"steps": []}]  # fmt: skip
    assert all(parse_steps(b) is None for b in odd_steps) and all(parse_resets(b) is None for b in odd_resets)
    # what the fast path leaves is the route's to answer, by its pydantic models (lax: "1", true and
    # 1.0 are the int 1): a body they refuse is a 422; one they take is served, its item answered
    # (no session 1 here); the server serving on
    error = {"code": "unknown_session", "message": "unknown session 1 (closed, expired, or never created)"}
    unknown = {"results": [{"session_id": 1, "error": error}]}
    expected = {
        "/v1/step": [422, 422, 422, 422, unknown, unknown, 422],
        "/v1/reset": [422, unknown, 422, unknown, 422],
    }
    url = server()
    with httpx.Client(base_url=url) as c:
        for path, bodies in (("/v1/step", odd_steps[:-1]), ("/v1/reset", odd_resets)):
            for body, answer in zip(bodies, expected[path], strict=True):
                r = c.post(path, json=body)
                if answer == 422:
                    _err(r, 422, "invalid_request")
                else:
                    assert (r.status_code, r.json()) == (200, answer), (path, body, r.text)
        sid = c.post("/v1/sessions", json={"env": "guess", "task_id": 1}).json()["session_id"]
        assert (
            c.post("/v1/step", json={"steps": [{"session_id": sid, "action": "guess 1"}]}).status_code == 200
        )


def _play_out(c: httpx.Client, sid: int, autoreset, hidden: int = 100) -> dict:
    """Guess 1, 2, ... in batched steps asking ``autoreset`` until an episode ends; its last item."""
    for g in range(1, hidden + 1):
        step = {"session_id": sid, "action": f"guess {g}", "autoreset": autoreset}
        out = c.post("/v1/step", json={"steps": [step]}).json()["results"][0]
        assert "error" not in out, out
        if out["terminated"] or out["truncated"]:
            return out
        assert "reset" not in out  # asked for, not done: the episode goes on
    raise AssertionError("the episode did not end")


@pytest.mark.parametrize("route", ["fast path", "pydantic route"])
def test_a_batched_step_that_ends_its_episode_autoresets_in_the_same_request(server, route):
    """``autoreset``: the ended episode's last step stands (reward, ends, info), and the new
    episode's first observation comes back under ``reset``, as a reset of that task answers it; the
    session then plays the new episode. Both the fast path and the route answer it (a session id
    given as "1" goes to the route's lax models)."""
    import agentgym

    url = server(["guess"])
    sid_of = (lambda sid: sid) if route == "fast path" else str
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={"env": "guess", "task_id": 5}).json()["session_id"]
        env = agentgym.make("guess")
        env.reset(options={"task_id": 5})
        for g in range(1, 101):  # the same episode in-process: its last step is the reference
            last = env.step(f"guess {g}")
            if last[2] or last[3]:
                break
        last_score = env.score
        expected_reset = env.reset(seed=3, options={"task_id": 7})
        for g in range(1, 101):
            step = {"session_id": sid_of(sid), "action": f"guess {g}", "autoreset": {"task_id": 7, "seed": 3}}
            out = c.post("/v1/step", json={"steps": [step]}).json()["results"][0]
            if out["terminated"] or out["truncated"]:
                break
        assert [out["observation"], out["reward"], out["terminated"], out["truncated"]] == list(last[:4])
        assert (out["info"], out["score"]) == (last[4], last_score)
        assert out["reset"] == {"observation": expected_reset[0], "info": expected_reset[1]}
        step = c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}).json()
        assert step["info"]["task_id"] == 7  # the session holds the new episode
        # an autoreset to a task that is none: the step stands, the reset's error is its own
        c.post(f"/v1/sessions/{sid}/reset", json={"task_id": 5})
        out = _play_out(c, sid, {"task_id": 10**9})
        assert out["reset"]["error"]["code"] == "unknown_task"
        _err(c.post(f"/v1/sessions/{sid}/step", json={"action": "guess 1"}), 409, "episode_over")


def test_autoreset_true_takes_the_sessions_next_task_from_those_it_was_created_with(server):
    url = server(["guess"])
    with httpx.Client(base_url=url) as c:
        r = c.post("/v1/sessions", json={"env": "guess", "task_id": 1, "tasks": [2, 3]}).json()
        sid = r["session_id"]
        assert _play_out(c, sid, True)["reset"]["info"]["task_id"] == 2
        assert _play_out(c, sid, True)["reset"]["info"]["task_id"] == 3
        assert _play_out(c, sid, True)["reset"] is None  # none left: the episode stays ended
        _err(c.post("/v1/sessions", json={"env": "guess", "tasks": [-1]}), 422, "invalid_request")
        # a step asking for no autoreset (false) is a plain step; a bad autoreset is the route's 422
        r = c.post("/v1/sessions", json={"env": "guess", "task_id": 1}).json()
        item = {"session_id": r["session_id"], "action": "guess 1", "autoreset": False}
        assert "error" not in c.post("/v1/step", json={"steps": [item]}).json()["results"][0]
        for bad in ({"task_id": -1}, {"task": 1}, "yes", 1):
            item["autoreset"] = bad
            _err(c.post("/v1/step", json={"steps": [item]}), 422, "invalid_request")


def test_the_pool_autoresets_and_its_session_holds_the_new_episode(server):
    from agentgym.client import AsyncEnvPool

    url = server(["guess"])

    async def play() -> None:
        async with AsyncEnvPool(url, "guess") as pool:
            [s] = await pool.open([1])
            for g in range(1, 101):
                [o] = await pool.step([(s, f"guess {g}", (4, None))])
                if o.terminated or o.truncated:
                    break
                assert o.reset is None and s.task_id == 1
            assert o.reset is not None and o.reset["info"]["task_id"] == 4
            assert (s.task_id, s.observation, s.actions, s.done) == (4, o.reset["observation"], [], False)
            [o] = await pool.step([(s, "guess 50")])
            assert o.error is None and o.info["task_id"] == 4 and s.actions == ["guess 50"]
            # the session's own tasks, in turn (``True``), and none left: the episode stays ended
            [q] = await pool.open([1], tasks=[[2]])
            for want in (2, None):
                for g in range(1, 101):
                    [o] = await pool.step([(q, f"guess {g}", True)])
                    if o.terminated or o.truncated:
                        break
                assert (o.reset["info"]["task_id"] if o.reset is not None else None) == want
            assert q.task_id == 2 and q.tasks == [] and q.done

    asyncio.run(play())


def _two_requests_on_one_connection(url: str, pause_s: float) -> int:
    """``GET /health`` twice over one connection, ``pause_s`` apart: the second answer's status, 0
    where the server had closed the connection."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    try:
        conn.request("GET", "/health")
        first = conn.getresponse()
        assert first.status == 200 and first.read()
        time.sleep(pause_s)
        try:
            conn.request("GET", "/health")
            second = conn.getresponse()
        except (http.client.HTTPException, OSError):  # closed: the request hit a reset or nothing
            return 0
        second.read()
        return second.status
    finally:
        conn.close()


def test_an_idle_connection_outlives_the_clients_keep_alive(server):
    """A connection idle for longer than httpx keeps one for reuse (5 s) is still open, in the
    thread server and in ``agentgym serve``: a server that closes it then races the client's next
    request on it, which reads as "connection reset by peer"."""
    from agentgym.server.background import serve_in_process

    assert _two_requests_on_one_connection(server(["guess"]), 6) == 200
    with serve_in_process(["guess"]) as served:
        assert _two_requests_on_one_connection(served.url, 6) == 200
