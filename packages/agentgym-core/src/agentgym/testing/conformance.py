"""The conformance suite every env runs (see ``agentgym.testing``).

pytest is imported where the suite is built, so that the helpers (``run_expert``, ``run_actions``,
``sample_ids``) serve benchmarks and scripts in environments without it."""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from agentgym.env import TextEnv
from agentgym.plugins import get_env_spec
from agentgym.spec import EnvSpec

INVALID_ACTIONS = ("", "   ", "xyzzy plugh 42", "\x00\x01\x7f", "é🙂" * 20, "a" * 5000)


@dataclass
class ConformanceConfig:
    """The kit's options (``agentgym_conformance = {"env": ..., option: value}``); the table in
    docs/env-contract.md lists them, and a test keeps the two in step."""

    env: str
    sample: int = 5  # task ids per split for determinism / HTTP / available-action checks
    expert_sample: int = 10  # task ids the expert must solve
    expert_min_success: float = 1.0
    max_turns: int | None = None  # default: the spec's default_max_turns
    expert_max_turns: int | None = None  # default: max_turns
    min_distinct: float = 0.9  # fraction of sampled ids that must give distinct tasks
    invalid_actions: Sequence[str] = field(default_factory=lambda: INVALID_ACTIONS)
    available_actions: int = 20  # listed actions tried per sampled task (each must be valid)
    http: bool = True
    workers: int = 1

    @classmethod
    def parse(cls, raw: Any) -> ConformanceConfig:
        import pytest

        if isinstance(raw, str):
            return cls(env=raw)
        if isinstance(raw, dict) and "env" in raw:
            known = {f.name for f in fields(cls)}
            unknown = set(raw) - known
            if unknown:
                raise pytest.UsageError(
                    f"agentgym_conformance: unknown option(s) {sorted(unknown)}; known: {sorted(known)}"
                )
            return cls(**raw)
        raise pytest.UsageError("agentgym_conformance must be an env name or a dict with an 'env' key")


def sample_ids(spec: EnvSpec, k: int) -> list[int]:
    """``k`` ids of each split (test split first), drawn with a fixed seed: the same on every run,
    yet not evenly spaced (even spacing can land on one residue class, e.g. one level of 40)."""
    out: list[int] = []
    names = sorted(spec.splits, key=lambda n: n != "test")
    for name in names:
        ids = spec.splits[name].task_ids
        if not len(ids):
            continue
        picks = random.Random(f"{spec.name}/{name}").sample(range(len(ids)), min(k, len(ids)))
        out.extend(ids[i] for i in picks)
    return list(dict.fromkeys(out)) or list(range(k))


def _canon(value: Any) -> Any:
    from agentgym.protocol import jsonable

    return json.loads(json.dumps(jsonable(value), sort_keys=True))


def run_expert(
    spec: EnvSpec, env: TextEnv, task_id: int, max_turns: int
) -> tuple[list[str], list[tuple], bool]:
    """Play the expert on ``task_id``; returns (actions, step records, success)."""
    observation, info = env.reset(options={"task_id": task_id})
    act = spec.make_expert(env)
    actions, records = [], []
    for _ in range(max_turns):
        action = act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        records.append((observation, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return actions, records, bool(info.get("success"))


def run_actions(env: Any, task_id: int, actions: Sequence[str]) -> list[Any]:
    """Reset to ``task_id`` and apply ``actions`` (stopping at the episode's end); canonical records."""
    observation, info = env.reset(options={"task_id": task_id})
    records: list[Any] = [_canon([observation, info])]
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        records.append(_canon([observation, reward, terminated, truncated, info]))
        if terminated or truncated:
            break
    return records


def _why(records: list[tuple], max_turns: int) -> str:
    """How an expert's episode ended without success: termination and the last observation."""
    if not records:
        return "no step was taken"
    observation, _, terminated, truncated, info = records[-1]
    if terminated:
        ending = "terminated without success (failure)"
    elif truncated:
        ending = "truncated by the env"
    else:
        ending = f"still going after expert_max_turns={max_turns} turns"
    invalid = sum(1 for r in records if r[4].get("valid_action") is False)
    extra = f"; {invalid} invalid action(s)" if invalid else ""
    return f"{ending} after {len(records)} step(s){extra}; last observation: {observation[-300:]!r}"


@dataclass(frozen=True)
class _Plan:
    """What the suite's tests share: the options, the env's spec and the task ids they sample."""

    config: ConformanceConfig
    spec: EnvSpec
    ids: list[int]  # for determinism, invalid actions, listed actions and HTTP parity
    expert_ids: list[int]  # for the expert's success rate
    expert_turns: int

    @classmethod
    def of(cls, config: ConformanceConfig) -> _Plan:
        spec = get_env_spec(config.env)
        max_turns = config.max_turns or spec.default_max_turns
        per_split = max(1, config.expert_sample // max(1, len(spec.splits)))
        return cls(
            config=config,
            spec=spec,
            ids=sample_ids(spec, config.sample),
            expert_ids=sample_ids(spec, per_split)[: config.expert_sample],
            expert_turns=config.expert_max_turns or max_turns,
        )


def build_suite(config: ConformanceConfig) -> dict[str, Any]:
    """The suite's test functions and fixtures, closed over ``config``."""
    plan = _Plan.of(config)
    suite: dict[str, Callable[..., Any]] = {
        **_fixtures(plan),
        **_import_tests(plan),
        **_reset_tests(plan),
        **_action_tests(plan),
        **_gymnasium_tests(plan),
    }
    if config.http:
        suite.update(_http_tests(plan))
    if plan.spec.expert is not None:
        suite.update(_expert_tests(plan))
    return suite


def _fixtures(plan: _Plan) -> dict[str, Callable[..., Any]]:
    """``conformance_env`` (one env for the module) and, with ``http``, ``conformance_url`` (it served)."""
    import pytest

    @pytest.fixture(scope="module")
    def conformance_env() -> Any:
        env = plan.spec.make()
        yield env
        env.close()

    @pytest.fixture(scope="module")
    def conformance_url() -> Any:
        from agentgym.server.background import serve_in_thread

        with serve_in_thread([plan.config.env], workers=plan.config.workers) as url:
            yield url

    if not plan.config.http:
        return {"conformance_env": conformance_env}
    return {"conformance_env": conformance_env, "conformance_url": conformance_url}


def _import_tests(plan: _Plan) -> dict[str, Callable[..., Any]]:
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


def _reset_tests(plan: _Plan) -> dict[str, Callable[..., Any]]:
    """Resetting to a task id: the same task every time, and different ids give different tasks."""
    import pytest

    spec, ids = plan.spec, plan.ids

    @pytest.mark.parametrize("task_id", ids)
    def test_reset_is_deterministic(task_id: int) -> None:
        a, b = spec.make(), spec.make()
        try:
            first = a.reset(options={"task_id": task_id})
            again = a.reset(options={"task_id": task_id})
            fresh = b.reset(options={"task_id": task_id})
        finally:
            a.close()
            b.close()
        assert _canon(first) == _canon(again) == _canon(fresh), f"task {task_id}: reset is not deterministic"
        obs, info = first
        assert isinstance(obs, str) and obs.strip(), "reset must return a non-empty observation"
        assert info.get("task_id") == task_id
        assert isinstance(info.get("instruction"), str) and info["instruction"].strip(), (
            "info['instruction'] missing"
        )
        assert "category" in info

    def test_different_ids_give_different_tasks(conformance_env: TextEnv) -> None:
        # Two tasks may open with the same words (a hidden number); what the expert sees while
        # solving them may not all coincide.
        prints = {}
        for task_id in ids:
            records: list[tuple] = []
            if spec.expert is not None:
                _, records, _ = run_expert(spec, conformance_env, task_id, plan.expert_turns)
            obs, info = conformance_env.reset(options={"task_id": task_id})
            # What the agent sees, not the ids the framework adds (task_id, category).
            seen = [obs, info.get("instruction"), [(r[0], r[1], r[2]) for r in records]]
            prints[task_id] = json.dumps(_canon(seen), sort_keys=True)
        distinct = len(set(prints.values()))
        assert distinct >= max(2, plan.config.min_distinct * len(ids)), (
            f"only {distinct} distinct tasks among ids {ids}"
        )

    return {
        "test_reset_is_deterministic": test_reset_is_deterministic,
        "test_different_ids_give_different_tasks": test_different_ids_give_different_tasks,
    }


def _action_tests(plan: _Plan) -> dict[str, Callable[..., Any]]:
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


def _gymnasium_tests(plan: _Plan) -> dict[str, Callable[..., Any]]:
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
            assert obs == spec.make().reset(options={"task_id": ids[0]})[0]
        finally:
            env.close()

    return {
        "test_spaces_and_gymnasium_checker": test_spaces_and_gymnasium_checker,
        "test_registered_with_gymnasium": test_registered_with_gymnasium,
    }


def _http_tests(plan: _Plan) -> dict[str, Callable[..., Any]]:
    """The env served over HTTP answers exactly like the env in-process."""
    import pytest

    spec = plan.spec

    @pytest.mark.parametrize("task_id", plan.ids)
    def test_http_matches_in_process(conformance_url: str, conformance_env: TextEnv, task_id: int) -> None:
        from agentgym.client import RemoteEnv

        actions: list[str] = []
        if spec.expert is not None:
            actions, _, _ = run_expert(spec, conformance_env, task_id, plan.expert_turns)
        # An invalid action first: the error path must match too.
        actions = ["xyzzy plugh 42", *actions]
        local = run_actions(conformance_env, task_id, actions)
        remote_env = RemoteEnv(conformance_url, plan.config.env)
        try:
            remote = run_actions(remote_env, task_id, actions)
        finally:
            remote_env.close()
        assert len(remote) == len(local)
        for i, (served, in_process) in enumerate(zip(remote, local, strict=True)):
            assert served == in_process, f"task {task_id}, step {i}: served env differs from in-process"

    return {"test_http_matches_in_process": test_http_matches_in_process}


def _expert_tests(plan: _Plan) -> dict[str, Callable[..., Any]]:
    """The expert solves (at least ``expert_min_success`` of) a sample of tasks."""
    spec, expert_ids, expert_turns = plan.spec, plan.expert_ids, plan.expert_turns
    min_success = plan.config.expert_min_success

    def test_expert_solves_sample(conformance_env: TextEnv) -> None:
        failures = []
        for task_id in expert_ids:
            actions, records, success = run_expert(spec, conformance_env, task_id, expert_turns)
            if not success:
                failures.append(f"task {task_id}: {_why(records, expert_turns)}")
        rate = 1 - len(failures) / len(expert_ids)
        assert rate >= min_success, (
            f"expert solved {rate:.0%} of {len(expert_ids)} tasks (needs {min_success:.0%}); "
            "failed:\n" + "\n".join(failures)
        )

    return {"test_expert_solves_sample": test_expert_solves_sample}
