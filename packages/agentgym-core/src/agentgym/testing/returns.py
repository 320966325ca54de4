"""The kit's check that every return it sees keeps to the spec's ``reward_range``: the expert's
episodes, random ones and fuzzed ones (random actions mixed with invalid ones). A return above the
range (a success paid on top of partial credit) inflates every average an evaluation reports."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agentgym.env import TextEnv
from agentgym.testing.config import Plan
from agentgym.testing.episodes import random_episode, return_problem


def tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    """The return checks: the expert's episodes (where there is an expert) and random ones."""
    import pytest

    spec, config = plan.spec, plan.config
    out: dict[str, Callable[..., Any]] = {}

    def test_expert_returns_within_reward_range(conformance_expert: Any) -> None:
        problems = []
        for task_id in dict.fromkeys([*plan.ids, *plan.expert_ids]):
            _, records, _ = conformance_expert(task_id)
            problem = return_problem(spec, [record[1] for record in records])
            if problem is not None:
                problems.append(f"task {task_id}, the expert's episode: {problem}")
        assert not problems, "\n".join(problems)

    @pytest.mark.parametrize("task_id", plan.ids)
    def test_random_returns_within_reward_range(conformance_env: TextEnv, task_id: int) -> None:
        problems = []
        for k in range(config.random_episodes):
            fuzz = config.invalid_actions if k % 2 else ()
            rng = random.Random(f"{spec.name}/{task_id}/{k}")
            actions, rewards = random_episode(spec, conformance_env, task_id, plan.turns, rng, fuzz)
            problem = return_problem(spec, rewards)
            if problem is not None:
                kind = "fuzzed (with invalid actions)" if fuzz else "random"
                shown = ", ".join(repr(a[:40]) for a in actions[:12])
                problems.append(f"task {task_id}, a {kind} episode ({shown}): {problem}")
        assert not problems, "\n".join(problems)

    if spec.expert is not None:
        out["test_expert_returns_within_reward_range"] = test_expert_returns_within_reward_range
    if config.random_episodes > 0:
        out["test_random_returns_within_reward_range"] = test_random_returns_within_reward_range
    return out
