"""Our envs driven by skyrl-gym's own ``make`` and its ``init``/``step`` loop (``agentgym.adapters.skyrl``):
the expert's actions, written as a model's replies, solve BabyAI and a third-party plugin in-process
and over HTTP; a reply that does not parse is an observation; a server that goes away raises."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentgym.testing import import_or_skip

pytestmark = pytest.mark.interop
skyrl_gym = import_or_skip("skyrl_gym")

from agentgym.adapters import skyrl as adapter  # noqa: E402
from agentgym.errors import AgentGymError, EpisodeOverError  # noqa: E402
from agentgym.parsers import format_action, parse_react  # noqa: E402
from agentgym.plugins import get_env_spec  # noqa: E402
from agentgym.prompting import format_error_observation, system_prompt  # noqa: E402
from agentgym.server.background import ServedProcess, serve_in_process  # noqa: E402

BABYAI_TASK = 0  # BabyAI's GoToRedBall, seed 0: the expert solves it in a few steps


def reply(parser: str, action: str) -> str:
    """A model-like reply carrying ``action`` in the env's format (a thought first, where it has one)."""
    if parser == "react":
        return f"Thought: I follow my plan; this is the next step.\nAction: {action}"
    return format_action(parser, action)


def play(sky: Any, expert: Callable[[Any, str, dict], str]) -> tuple[list[dict], dict, float, dict]:
    """skyrl-gym's loop: ``init``, then ``step`` with the expert's replies until ``done``; returns
    the opening messages, the reset's info, the return and the last step's metadata."""
    messages, info = sky.init([{"role": "user", "content": "placeholder"}])
    reset_info, parser = info, sky.agentgym_spec.action_parser
    observation, total, metadata = info["observation"], 0.0, {}
    for _ in range(sky.max_turns):
        out = sky.step(reply(parser, expert(sky, observation, info)))
        total += out["reward"]
        metadata, info, observation = out["metadata"], out["metadata"]["info"], out["metadata"]["observation"]
        assert metadata["valid_action"], observation
        if out["done"]:
            assert out["observations"] == []
            break
        assert [m["role"] for m in out["observations"]] == ["user"]
    assert total == pytest.approx(sky.env.score)  # the env's own return: every step's reward came through
    return messages, reset_info, total, metadata


def local_expert(name: str) -> Callable[[Any, str, dict], str]:
    made: dict[str, Any] = {}

    def act(sky: Any, observation: str, info: dict) -> str:
        if "act" not in made:  # made after the reset, as AgentGym's rollout makes it
            made["act"] = get_env_spec(name).make_expert(sky.env)
        return made["act"](observation, info)

    return act


def served_expert(sky: Any, observation: str, info: dict) -> str:
    return sky.env.expert_action()  # the server's expert, for the session behind this env


def assert_solved(messages: list[dict], reset_info: dict, total: float, metadata: dict, name: str) -> None:
    """The opening turns are AgentGym's own; the episode ended in success, by the env."""
    assert messages == [
        {"role": "system", "content": system_prompt(get_env_spec(name), reset_info)},
        {"role": "user", "content": reset_info["observation"]},
    ]
    assert metadata["success"] is True and 0 < total == pytest.approx(metadata["return"])
    assert metadata["terminated"] is True and metadata["turn_limit"] is False


@pytest.fixture(scope="module")
def registered(scaffold_env: str) -> list[str]:
    return adapter.register()


@pytest.fixture(scope="module")
def server(scaffold_env: str) -> Iterator[ServedProcess]:
    """``agentgym serve babyai <scaffold>``, as a user runs it, on loopback."""
    with serve_in_process(["babyai", scaffold_env]) as served:
        yield served


def test_register_gives_every_installed_env_an_id_and_is_idempotent(registered: list[str]) -> None:
    import agentgym

    assert {adapter.env_id(n) for n in agentgym.env_specs()} == set(registered)
    assert adapter.register() == registered  # again: no RegistrationError
    assert set(registered) <= set(skyrl_gym.registry)
    assert skyrl_gym.spec("agentgym/babyai").to_json()  # a string entry point: serialisable


def test_babyai_expert_solves_a_task_through_skyrl_make(registered: list[str]) -> None:
    sky = skyrl_gym.make("agentgym/babyai", env_config={}, extras={"task_id": BABYAI_TASK})
    try:
        assert isinstance(sky, skyrl_gym.Env) and sky.max_turns == get_env_spec("babyai").default_max_turns
        assert_solved(*play(sky, local_expert("babyai")), "babyai")
        assert sky.get_metrics()["success"] == 1.0
        with pytest.raises(EpisodeOverError):
            sky.step(reply("react", "move forward"))
    finally:
        sky.close()


def test_the_scaffold_plugin_is_solved_through_skyrl_make(registered: list[str], scaffold_env: str) -> None:
    spec = get_env_spec(scaffold_env)
    task = next(iter(spec.splits["test"]))
    sky = skyrl_gym.make(adapter.env_id(scaffold_env), extras={"extra_info": {"task_id": task}})
    try:
        assert sky.max_turns == spec.default_max_turns
        assert_solved(*play(sky, local_expert(scaffold_env)), scaffold_env)
    finally:
        sky.close()


def test_served_envs_are_solved_over_http(server: ServedProcess, scaffold_env: str) -> None:
    ids = adapter.register(url=server.url)
    assert set(ids) == {"agentgym/babyai", adapter.env_id(scaffold_env)}
    try:
        scaffold_task = next(iter(get_env_spec(scaffold_env).splits["test"]))
        for name, task in (("babyai", BABYAI_TASK), (scaffold_env, scaffold_task)):
            sky = skyrl_gym.make(adapter.env_id(name), extras={"task_id": task})
            try:
                assert sky.env.url == server.url  # a session on the server, not an in-process env
                assert_solved(*play(sky, served_expert), name)
            finally:
                sky.close()
    finally:
        adapter.register()  # back to in-process, for the tests that follow


def test_a_reply_that_does_not_parse_is_an_observation(registered: list[str]) -> None:
    sky = skyrl_gym.make("agentgym/babyai", extras={"task_id": BABYAI_TASK, "max_turns": 3})
    try:
        sky.init([])
        text = "I think I should head towards the ball."
        out = sky.step(text)
        assert out["observations"] == [
            {"role": "user", "content": format_error_observation(parse_react(text).error)}
        ]
        assert out["reward"] == 0.0 and out["done"] is False and out["metadata"]["format_error"] is True
        out = sky.step(reply("react", "fly to the moon"))  # parses, but the env rejects it
        assert out["metadata"]["valid_action"] is False and out["reward"] == 0.0 and not out["done"]
        assert out["observations"][0]["content"] == out["metadata"]["observation"]
        out = sky.step("still thinking")  # the third turn of three: the turn cap ends the episode
        assert out["done"] is True and out["observations"] == []
        assert out["metadata"]["turn_limit"] is True
        assert (out["metadata"]["terminated"], out["metadata"]["truncated"]) == (False, False)
        assert sky.get_metrics() == {
            "turns": 3,
            "return": 0.0,
            "success": 0.0,
            "format_errors": 2,
            "invalid_actions": 1,
        }
    finally:
        sky.close()


def test_a_server_that_goes_away_raises_rather_than_scoring_zero(registered: list[str]) -> None:
    with serve_in_process(["babyai"]) as served:
        adapter.register(["babyai"], url=served.url)
        try:
            sky = skyrl_gym.make("agentgym/babyai", extras={"task_id": BABYAI_TASK})
            sky.init([])
            assert sky.step(reply("react", "turn left"))["metadata"]["valid_action"] is True
            served.proc.terminate()
            served.proc.wait(timeout=30)
            with pytest.raises(AgentGymError):
                sky.step(reply("react", "turn right"))
            sky.close()
        finally:
            adapter.register(["babyai"])


def test_importing_the_adapter_needs_no_skyrl_gym() -> None:
    code = (
        "import sys; sys.modules['skyrl_gym'] = None\n"
        "import agentgym.adapters.skyrl as m\n"
        "try:\n    m.register()\nexcept ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "agentgym-core[skyrl]" in done.stdout


def test_dataset_rows_name_the_env_class_and_task(registered: list[str]) -> None:
    rows = adapter.dataset_rows("babyai", "test", limit=2)
    assert [r["env_class"] for r in rows] == ["agentgym/babyai"] * 2
    extras = {k: v for k, v in rows[0].items() if k not in ("prompt", "env_class")}
    sky = skyrl_gym.make(rows[0]["env_class"], extras=extras)
    try:
        assert sky.init(rows[0]["prompt"])[1]["task_id"] == rows[0]["task_id"]
    finally:
        sky.close()
