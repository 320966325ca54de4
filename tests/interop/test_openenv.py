"""Our envs through OpenEnv's own client (``GenericEnvClient``) on ``agentgym serve --openenv``
(``agentgym.adapters.openenv``): the expert's episodes on BabyAI, TextCraft and a third-party plugin
are the episodes played in-process; an invalid action is an observation; a bad task id, a step with
no episode and a crashed env are errors, never a reward; the token guards the OpenEnv routes too;
without openenv-core, ``--openenv`` is a one-line error."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgym.testing import import_or_skip

pytestmark = pytest.mark.interop
import_or_skip("openenv.core")

import httpx  # noqa: E402
from openenv.core import GenericEnvClient  # noqa: E402

import agentgym  # noqa: E402
from agentgym.adapters import openenv as adapter  # noqa: E402
from agentgym.errors import EnvCrashedError, EpisodeOverError, UnknownTaskError  # noqa: E402
from agentgym.plugins import get_env_spec  # noqa: E402
from agentgym.server.background import ServedProcess, serve_in_process, serve_in_thread  # noqa: E402
from agentgym.testing.episodes import canon  # noqa: E402

TASKS = {"babyai": [0, 7], "textcraft": [0, 3]}


@pytest.fixture(scope="module")
def server(scaffold_env: str) -> Iterator[ServedProcess]:
    """``agentgym serve babyai textcraft <scaffold> --openenv``, as a user runs it, on loopback."""
    with serve_in_process(["babyai", "textcraft", scaffold_env], "--openenv") as served:
        yield served


def client(url: str, env: str) -> Any:
    """OpenEnv's own client, sync, on the env's base URL."""
    return GenericEnvClient(base_url=f"{url}/openenv/{env}").sync()


def in_process(env_name: str, task_id: int) -> tuple[list[str], list[Any]]:
    """The expert's actions on ``task_id`` and the episode's records, played with ``agentgym.make``."""
    spec, env = get_env_spec(env_name), agentgym.make(env_name)
    try:
        observation, info = env.reset(options={"task_id": task_id})
        act, actions = spec.make_expert(env), []
        records = [canon([observation, None, False, False, False, info])]
        for _ in range(spec.default_max_turns):
            actions.append(act(observation, info))
            observation, reward, terminated, truncated, info = env.step(actions[-1])
            records.append(canon([observation, reward, terminated or truncated, terminated, truncated, info]))
            if terminated or truncated:
                break
        return actions, records
    finally:
        env.close()


def record(result: Any) -> Any:
    o = result.observation
    return canon([o["text"], result.reward, result.done, o["terminated"], o["truncated"], o["info"]])


def over_openenv(url: str, env_name: str, task_id: int, actions: list[str]) -> list[Any]:
    with client(url, env_name) as env:
        records = [record(env.reset(task_id=task_id))]
        records += [record(env.step({"message": action})) for action in actions]
        state = env.state()
    assert state["env"] == env_name and state["task_id"] == task_id and state["step_count"] == len(actions)
    return records


@pytest.mark.parametrize("env_name", sorted(TASKS))
def test_expert_episodes_over_openenv_equal_those_in_process(server: ServedProcess, env_name: str) -> None:
    for task_id in TASKS[env_name]:
        actions, expected = in_process(env_name, task_id)
        got = over_openenv(server.url, env_name, task_id, actions)
        assert got == expected
        assert got[-1][2] is True and got[-1][5]["success"] is True  # done, and solved
        assert sum(r[1] for r in got[1:]) > 0


def test_a_third_party_plugin_over_openenv(server: ServedProcess, scaffold_env: str) -> None:
    actions, expected = in_process(scaffold_env, 0)
    assert over_openenv(server.url, scaffold_env, 0, actions) == expected
    assert expected[-1][5]["success"] is True


def test_an_invalid_action_is_an_observation(server: ServedProcess) -> None:
    with client(server.url, "babyai") as env:
        env.reset(task_id=0)
        result = env.step({"message": "dance a jig"})
        assert result.reward == 0.0 and result.done is False
        assert result.observation["info"]["valid_action"] is False and result.observation["text"]
        assert env.step({"message": ""}).observation["info"]["valid_action"] is False  # the env's own check


def test_errors_are_errors_not_rewards(server: ServedProcess) -> None:
    with client(server.url, "textcraft") as env:
        with pytest.raises(RuntimeError, match="unknown_task"):
            env.reset(task_id=10**9)
        with pytest.raises(RuntimeError, match="invalid_task"):
            env.reset(task_id="first")
        with pytest.raises(RuntimeError, match="Invalid message"):  # no "message": OpenEnv's own check
            env.step({"text": "craft"})
        actions, _ = in_process("textcraft", 0)
        env.reset(task_id=0)  # the session outlives the errors
        for action in actions:
            result = env.step({"message": action})
        assert result.done
        with pytest.raises(RuntimeError, match="episode_over"):
            env.step({"message": actions[-1]})


def test_openenv_http_routes_beside_agentgym_routes(server: ServedProcess) -> None:
    base = f"{server.url}/openenv/textcraft"
    assert httpx.get(f"{base}/health").json()["status"] == "healthy"
    assert "message" in httpx.get(f"{base}/schema").json()["action"]["properties"]
    assert httpx.get(f"{base}/metadata").json()["name"] == "textcraft"
    first = httpx.post(f"{base}/reset", json={"task_id": 3}).json()
    assert first["done"] is False and first["reward"] is None and first["observation"]["info"]["task_id"] == 3
    bad = httpx.post(f"{base}/reset", json={"task_id": 10**9})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "unknown_task"
    assert httpx.get(f"{server.url}/health").status_code == 200  # AgentGym's own routes still there
    assert httpx.get(f"{server.url}/openenv/nosuchenv/health").status_code == 404


def test_a_crashed_env_is_an_error_and_the_next_reset_starts_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    env = adapter.environment("babyai")
    assert isinstance(env, adapter.AgentGymEnvironment)
    with pytest.raises(EpisodeOverError):
        env.step(adapter.AgentGymAction(message="turn left"))
    first = env.reset(task_id=0)
    assert first.metadata == {"terminated": False, "truncated": False, "info": first.info}

    def crash(action: str) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(env._env, "step_action", crash)
    with pytest.raises(EnvCrashedError, match="env_crashed: .*boom"):
        env.step(adapter.AgentGymAction(message="turn left"))
    assert env.reset(task_id=0).text == first.text  # a new instance, the same task
    with pytest.raises(UnknownTaskError):
        adapter.environment("textcraft").reset(task_id=10**9)


def test_the_token_guards_the_openenv_routes() -> None:
    from websockets.sync.client import connect

    with serve_in_thread(["babyai"], token="s3cret", openenv=True) as url:
        assert httpx.get(f"{url}/openenv/babyai/schema").status_code == 401
        headers = {"Authorization": "Bearer s3cret"}
        assert httpx.get(f"{url}/openenv/babyai/schema", headers=headers).status_code == 200
        with pytest.raises(ConnectionError):  # OpenEnv's client sends no token
            client(url, "babyai").connect()
        ws_url = url.replace("http", "ws", 1) + "/openenv/babyai/ws"
        with connect(ws_url, additional_headers=headers) as ws:
            ws.send('{"type": "reset", "data": {"task_id": 0}}')
            assert '"type":"observation"' in ws.recv()


def test_serve_openenv_without_openenv_core_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "openenv.py").write_text("raise ImportError('No module named openenv (simulated)')\n")
    pythonpath = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "agentgym", "serve", "babyai", "--openenv", "--port", "0"],
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'agentgym-core[openenv]'" in lines[0], done.stderr
