"""The conformance suite itself: it passes a good env and catches broken ones."""

from __future__ import annotations

import textwrap

import pytest
from planted_counter import COUNTER, IMPORTS

ENVS = (
    "import random\n"
    + IMPORTS
    + COUNTER
    + textwrap.dedent("""

    class ListsWrongActions(Counter):
        def available_actions(self):
            return ["inc", "dec"]

    class Nondeterministic(Counter):
        def reset_task(self, task_id):
            obs, info = super().reset_task(task_id)
            return obs + f" ({random.random()})", info

    class RaisesOnInvalid(Counter):
        def step_action(self, action):
            if action != "inc":
                raise ValueError("bad action")
            return super().step_action(action)

    class SameTaskForAll(Counter):
        def reset_task(self, task_id):
            return super().reset_task(0)

    def expert(env):
        return lambda obs, info: "inc"

    def lazy_expert(env):
        return lambda obs, info: "wait"

    def spec(name, factory, exp=expert, **kwargs):
        return EnvSpec(name=name, factory=factory, expert=exp, default_max_turns=10,
                       splits={"test": Split(range(8), {"all": list(range(8))})}, **kwargs)

    @hookimpl
    def agentgym_envs():
        return [spec("counter", Counter), spec("nondet", Nondeterministic), spec("raiser", RaisesOnInvalid),
                spec("sameall", SameTaskForAll), spec("lazy", Counter, lazy_expert),
                spec("lister", ListsWrongActions), spec("noexpert", Counter, "suite_envs:no_such_expert"),
                spec("badparser", Counter, action_parser="reactt")]
""")
)


@pytest.fixture
def suite(pytester, monkeypatch):
    pytester.makepyfile(suite_envs=ENVS)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("AGENTGYM_PLUGIN_MODULES", "suite_envs")
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)  # the module holds a deliberately bad spec

    def run(config: str, *args: str):
        pytester.makeconftest(f"agentgym_conformance = {config}")
        return pytester.runpytest_subprocess(
            "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-rA", *args
        )

    return run


def test_a_good_env_passes_in_one_conftest_line(suite):
    result = suite('"counter"')
    result.assert_outcomes(passed=result.parseoutcomes()["passed"])
    assert result.ret == 0 and result.parseoutcomes()["passed"] >= 15
    result.stdout.no_fnmatch_line("*skipped*")
    for check in (
        "test_expert_returns_within_reward_range",
        "test_random_returns_within_reward_range[[]*[]]",
        "test_reset_forgets_the_previous_episode[[]*[]]",
        "test_tasks_are_the_same_in_another_process",
        "test_undeclared_task_ids_are_refused",
        "test_undeclared_task_ids_are_refused_over_http",
    ):
        result.stdout.fnmatch_lines([f"PASSED conftest.py::{check}"])


def test_k_conformance_selects_the_suite(pytester, suite):
    result = suite('{"env": "counter", "http": False, "cross_process": False}', "-k", "conformance")
    assert result.ret == 0 and result.parseoutcomes()["passed"] >= 15


@pytest.mark.parametrize(
    ("env", "failing_test", "why"),
    [
        ("nondet", "test_reset_is_deterministic", None),
        ("raiser", "test_invalid_action_is_an_observation", None),
        ("sameall", "test_different_ids_give_different_tasks", None),
        # the expert's turn cap by default: 30 x the turn cap (10), as `agentgym check` gives it
        ("lazy", "test_expert_solves_sample", "*task 0: still going after expert_max_turns=300 turns after 300 step(s)*wait*"),
        ("lister", "test_listed_available_actions_are_valid", "*listed action 'dec' was refused*"),
        ("noexpert", "test_factory_and_expert_import", "*expert 'suite_envs:no_such_expert' (plugin 'suite_envs' from*does not import*"),
    ],
)  # fmt: skip
def test_broken_envs_fail_the_right_check_and_say_why(suite, env, failing_test, why):
    result = suite(repr({"env": env, "http": False}))
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"FAILED *{failing_test}*"])
    if why:
        result.stdout.fnmatch_lines([why])


def test_an_invalid_spec_fails_collection_with_the_reason(suite):
    result = suite('"badparser"')
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*env 'badparser' is unavailable*action_parser 'reactt' does not exist*"])


def test_bad_config_is_a_usage_error(suite):
    result = suite('{"env": "counter", "colour": "blue"}')
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*unknown option*colour*"])
