"""The conformance suite every env runs (see ``agentgym.testing``): ``build_suite`` and the checks of
reset, actions, spaces, HTTP and the expert; the other checks live in modules of their own
(returns, carryover, instance_state, processes, task_ids).

pytest is imported where the suite is built, so that the helpers (``run_expert``, ``run_actions``,
``sample_ids``) serve benchmarks and scripts in environments without it."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

from agentgym.env import TextEnv
from agentgym.testing import carryover, instance_state, processes, returns, task_ids
from agentgym.testing.config import INVALID_ACTIONS, ConformanceConfig, Plan, sample_ids
from agentgym.testing.episodes import canon, first_difference, return_problem, run_actions, run_expert, why

__all__ = [
    "INVALID_ACTIONS",
    "ConformanceConfig",
    "build_suite",
    "run_actions",
    "run_expert",
    "sample_ids",
]


def build_suite(config: ConformanceConfig) -> dict[str, Any]:
    """The suite's test functions and fixtures, closed over ``config``."""
    plan = Plan.of(config)
    suite: dict[str, Callable[..., Any]] = {
        **_fixtures(plan),
        **_import_tests(plan),
        **_reset_tests(plan),
        **_action_tests(plan),
        **_gymnasium_tests(plan),
        **returns.tests(plan),
        **carryover.tests(plan),
        **instance_state.tests(plan),
        **task_ids.tests(plan),
    }
    if config.cross_process:
        suite.update(processes.tests(plan))
    if config.http:
        suite.update(_http_tests(plan))
        suite.update(task_ids.http_tests(plan))
    if plan.spec.expert is not None:
        suite.update(_expert_tests(plan))
    return suite


def _fixtures(plan: Plan) -> dict[str, Callable[..., Any]]:
    """``conformance_env`` (one env for the module), ``conformance_expert`` (the expert's episode on a
    task id in it, played once per id) and, with ``http``, ``conformance_url`` (the env served)."""
    import pytest

    @pytest.fixture(scope="module")
    def conformance_env() -> Any:
        env = plan.spec.make()
        yield env
        env.close()

    @pytest.fixture(scope="module")
    def conformance_expert(conformance_env: TextEnv) -> Callable[[int], tuple[list[str], list[tuple], bool]]:
        played: dict[int, tuple[list[str], list[tuple], bool]] = {}

        def play(task_id: int) -> tuple[list[str], list[tuple], bool]:
            if task_id not in played:
                played[task_id] = run_expert(plan.spec, conformance_env, task_id, plan.expert_turns)
            return played[task_id]

        return play

    @pytest.fixture(scope="module")
    def conformance_url() -> Any:
        from agentgym.server.background import serve_in_thread

        with serve_in_thread([plan.config.env], workers=plan.config.workers) as url:
            yield url

    fixtures = {"conformance_env": conformance_env, "conformance_expert": conformance_expert}
    if plan.config.http:
        fixtures["conformance_url"] = conformance_url
    return fixtures


def _import_tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    """The spec's factory, expert and compatible routes' dialect import."""
    import pytest

    spec = plan.spec

    def test_factory_and_expert_import() -> None:  # and the compatible routes' dialect
        from agentgym.spec import resolve

        for what, target in (("factory", spec.factory), ("expert", spec.expert), ("compat", spec.compat)):
            if target is None:
                continue
            try:
                resolve(target)
            except Exception as exc:
                pytest.fail(
                    f"{spec.name}: {what} {target!r} (plugin {spec.plugin!r} from {spec.distribution!r}) "
                    f"does not import: {type(exc).__name__}: {exc}"
                )

    return {"test_factory_and_expert_import": test_factory_and_expert_import}


def _reset_tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    """Resetting to a task id: the same task every time, and different ids give different tasks."""
    import pytest

    spec, ids = plan.spec, plan.ids

    @pytest.mark.parametrize("task_id", ids)
    def test_reset_is_deterministic(task_id: int) -> None:
        a = spec.make()
        try:
            first = a.reset(options={"task_id": task_id})
            again = a.reset(options={"task_id": task_id})
        finally:
            a.close()
        b = spec.make()
        try:
            fresh = b.reset(options={"task_id": task_id})
        finally:
            b.close()
        assert canon(first) == canon(again) == canon(fresh), f"task {task_id}: reset is not deterministic"
        obs, info = first
        assert isinstance(obs, str) and obs.strip(), "reset must return a non-empty observation"
        assert info.get("task_id") == task_id
        assert isinstance(info.get("instruction"), str) and info["instruction"].strip(), (
            "info['instruction'] missing"
        )
        assert "category" in info

    def test_different_ids_give_different_tasks(conformance_env: TextEnv, conformance_expert: Any) -> None:
        # Two tasks may open with the same words (a hidden number); what the expert sees while
        # solving them may not all coincide.
        prints = {}
        for task_id in ids:
            records: list[tuple] = []
            if spec.expert is not None:
                _, records, _ = conformance_expert(task_id)
            obs, info = conformance_env.reset(options={"task_id": task_id})
            # What the agent sees, not the ids the framework adds (task_id, category).
            seen = [obs, info.get("instruction"), [(r[0], r[1], r[2]) for r in records]]
            prints[task_id] = json.dumps(canon(seen), sort_keys=True)
        distinct = len(set(prints.values()))
        assert distinct >= max(2, plan.config.min_distinct * len(ids)), (
            f"only {distinct} distinct tasks among ids {ids}"
        )

    return {
        "test_reset_is_deterministic": test_reset_is_deterministic,
        "test_different_ids_give_different_tasks": test_different_ids_give_different_tasks,
    }


def _action_tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    """Actions: invalid and non-text ones are answered, listed ones accepted, none after the end."""
    import pytest

    spec, config, ids = plan.spec, plan.config, plan.ids

    @pytest.mark.parametrize("action", config.invalid_actions, ids=lambda a: repr(a[:12]))
    def test_invalid_action_is_an_observation(conformance_env: TextEnv, action: str) -> None:
        conformance_env.reset(options={"task_id": ids[0]})
        obs, reward, terminated, truncated, info = conformance_env.step(action)
        assert isinstance(obs, str) and obs.strip(), "an invalid action must be answered with an explanation"
        assert info.get("valid_action") is False, f"{action[:20]!r} was accepted as a valid action"
        assert not terminated, "an invalid action must not end the episode"
        assert reward <= 0
        problem = return_problem(spec, [reward])
        assert problem is None, f"task {ids[0]}, after the invalid action {action[:20]!r}: {problem}"

    def test_non_text_actions_are_observations(conformance_env: TextEnv) -> None:
        conformance_env.reset(options={"task_id": ids[0]})
        for bad in (None, 42, b"bytes"):
            obs, _, terminated, _, info = conformance_env.step(bad)
            assert obs and info["valid_action"] is False and not terminated

    def test_listed_available_actions_are_valid(conformance_env: TextEnv) -> None:
        # Every action the env lists right after reset is accepted (tried one by one from the reset).
        listed_any = False
        for task_id in ids:
            _, info = conformance_env.reset(options={"task_id": task_id})
            listed = list(info.get("available_actions") or [])[: config.available_actions]
            listed_any = listed_any or bool(listed)
            for action in listed:
                conformance_env.reset(options={"task_id": task_id})
                obs, _, _, _, after = conformance_env.step(action)
                assert after.get("valid_action") is not False, (
                    f"task {task_id}: listed action {action!r} was refused: {obs[:300]!r}"
                )
        if not listed_any:
            pytest.skip(f"{config.env} lists no available actions after reset")

    def test_step_after_end_is_an_error(conformance_env: TextEnv) -> None:
        from agentgym.errors import EpisodeOverError

        if spec.expert is None:
            pytest.skip(f"{config.env} has no expert to finish an episode")
        _, records, _ = run_expert(spec, conformance_env, ids[0], plan.expert_turns)
        if not (records and (records[-1][2] or records[-1][3])):
            pytest.skip("the expert did not end the episode")
        with pytest.raises(EpisodeOverError):
            conformance_env.step("anything")

    return {
        "test_listed_available_actions_are_valid": test_listed_available_actions_are_valid,
        "test_invalid_action_is_an_observation": test_invalid_action_is_an_observation,
        "test_non_text_actions_are_observations": test_non_text_actions_are_observations,
        "test_step_after_end_is_an_error": test_step_after_end_is_an_error,
    }


def _gymnasium_tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    """Gymnasium: the spaces pass its ``check_env``, and ``gymnasium.make`` gives the same env."""
    spec, ids = plan.spec, plan.ids

    def test_spaces_and_gymnasium_checker() -> None:
        from gymnasium.utils.env_checker import check_env

        env = spec.make()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                check_env(env, skip_render_check=True)
            obs, info = env.reset(options={"task_id": ids[0]})
            assert env.observation_space.contains(obs)
            assert env.action_space.contains(env.action_space.sample())
            env.step(env.action_space.sample())  # a random string must be handled, not raised
        finally:
            env.close()

    def test_registered_with_gymnasium() -> None:
        import gymnasium

        env = gymnasium.make(spec.gym_id)
        try:
            obs, info = env.reset(options={"task_id": ids[0]})
            direct = spec.make()
            try:
                assert obs == direct.reset(options={"task_id": ids[0]})[0]
            finally:
                direct.close()
        finally:
            env.close()

    return {
        "test_spaces_and_gymnasium_checker": test_spaces_and_gymnasium_checker,
        "test_registered_with_gymnasium": test_registered_with_gymnasium,
    }


def _http_tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    """The env served over HTTP answers exactly like the env in-process."""
    import pytest

    spec = plan.spec

    @pytest.mark.parametrize("task_id", plan.ids)
    def test_http_matches_in_process(
        conformance_url: str, conformance_env: TextEnv, conformance_expert: Any, task_id: int
    ) -> None:
        from agentgym.client import RemoteEnv

        actions: list[str] = []
        if spec.expert is not None:
            actions, _, _ = conformance_expert(task_id)
        # An invalid action first: the error path must match too.
        actions = ["xyzzy plugh 42", *actions]
        local = run_actions(conformance_env, task_id, actions)
        remote_env = RemoteEnv(conformance_url, plan.config.env)
        try:
            remote = run_actions(remote_env, task_id, actions)
        finally:
            remote_env.close()
        difference = first_difference(remote, local, ("served", "in-process"))
        assert difference is None, (
            f"task {task_id}: the served env differs from in-process ({difference}). "
            f"To fix: {_http_fix(spec, task_id, actions, local, remote)}"
        )
        problem = return_problem(spec, [record[1] for record in local[1:]])
        assert problem is None, (
            f"task {task_id}, an invalid action then the expert's: {problem}. To fix: keep the return "
            "within EnvSpec.reward_range after every step, or declare the range the env pays"
        )

    return {"test_http_matches_in_process": test_http_matches_in_process}


def _http_fix(spec: Any, task_id: int, actions: list[str], local: list[Any], remote: list[Any]) -> str:
    """What to change where the served env and the kit's in-process one differ, from two fresh
    in-process instances playing the same actions: the env is not deterministic, the kit's instance
    (which played before) keeps state of earlier episodes, or what the server sends differs."""
    fresh = []
    for _ in range(2):
        env = spec.make()
        try:
            fresh.append(run_actions(env, task_id, actions))
        finally:
            env.close()
    if fresh[0] != fresh[1]:
        return (
            "two fresh instances playing the same actions differ: derive everything from the task id "
            "and the actions (seed random generators with the id; no time, object ids or set order)"
        )
    if local != fresh[0]:
        return (
            "the in-process instance, which played other episodes first, answers unlike a fresh one: "
            "something of a previous episode survives reset; set all per-episode state in reset_task, "
            "not in __init__"
        )
    return (
        "a fresh in-process instance answers as the kit's does, the served one not: make observations "
        "and info JSON-serialisable with no object ids or set order (what the server sends), and reset "
        "all per-episode state in reset_task (the server reuses instances of closed sessions)"
    )


def _expert_tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    """The expert solves (at least ``expert_min_success`` of) a sample of tasks."""
    expert_ids, expert_turns = plan.expert_ids, plan.expert_turns
    min_success = plan.config.expert_min_success

    def test_expert_solves_sample(conformance_expert: Any) -> None:
        failures = []
        for task_id in expert_ids:
            actions, records, success = conformance_expert(task_id)
            if not success:
                failures.append(f"task {task_id}: {why(records, expert_turns)}")
        rate = 1 - len(failures) / len(expert_ids)
        assert rate >= min_success, (
            f"expert solved {rate:.0%} of {len(expert_ids)} tasks (needs {min_success:.0%}); "
            "failed:\n" + "\n".join(failures)
        )

    return {"test_expert_solves_sample": test_expert_solves_sample}
