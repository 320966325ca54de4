"""The kit's check that nothing of a played episode carries over into the next reset: an instance
that played a task part-way, to the end, or played another task, then reset to the task, plays it
exactly as a fresh instance does (the same observations, infos, rewards and return, and the same
expert's actions). A leaked move counter or inventory shows up here even where the expert still
solves the task; servers and rollouts reuse instances, so such a leak changes scores silently."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from agentgym.testing.config import Plan
from agentgym.testing.episodes import first_difference, play, random_policy

NAMES = ("on the reused instance", "on a fresh one")


def tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    import pytest

    @pytest.mark.parametrize("task_id", plan.reuse_ids)
    def test_reset_forgets_the_previous_episode(task_id: int) -> None:
        problem = reuse_problem(plan, task_id)
        assert problem is None, problem

    return {"test_reset_forgets_the_previous_episode": test_reset_forgets_the_previous_episode}


def _policy(plan: Plan, task_id: int) -> tuple[str, Callable[[Any], Callable[[str, dict], str]], int]:
    """The policy the check plays (the expert, else a seeded random one; the same moves given the
    same observations), its name, and its turn cap."""
    spec = plan.spec
    if spec.expert is not None:
        return "the expert", spec.make_expert, plan.expert_turns
    seed = f"{spec.name}/reuse/{task_id}"
    return "a random policy", lambda env: random_policy(spec, random.Random(seed)), plan.turns


def reuse_problem(plan: Plan, task_id: int) -> str | None:
    """What differs when one instance plays ``task_id`` after playing before, or ``None``."""
    spec = plan.spec
    who, policy, turns = _policy(plan, task_id)
    fresh = spec.make()
    try:
        want = play(fresh, task_id, policy, turns)
    finally:
        fresh.close()
    other = next((t for t in plan.ids if t != task_id), None)
    reused = spec.make()
    try:
        steps = max(1, len(want[0]) // 2)
        reused.reset(options={"task_id": task_id})
        for action in want[0][:steps]:
            if reused.step(action)[2:4] != (False, False):
                break
        scenarios = [
            f"task {task_id} part-way ({steps} of {len(want[0])} steps)",
            f"task {task_id} to the end",
        ]
        for i, scenario in enumerate(scenarios + ([f"task {other} to the end"] if other is not None else [])):
            if i == 2:
                play(reused, other, policy, turns)
            got = play(reused, task_id, policy, turns)
            difference = _difference(who, got, want)
            if difference is not None:
                return (
                    f"task {task_id}: an instance that played {scenario}, then reset to task {task_id}, "
                    f"does not play it as a fresh instance does: {difference}. Something of the "
                    "previous episode survives reset: set all per-episode state (counters, "
                    "inventories, flags, random generators) in reset_task, not in __init__"
                )
    finally:
        reused.close()
    return None


def _difference(who: str, got: tuple[list[str], list[Any]], want: tuple[list[str], list[Any]]) -> str | None:
    """Where a replay on the reused instance first departs from the fresh one's, and the returns."""
    (got_actions, got_records), (want_actions, want_records) = got, want
    returns = f"return {_return(got_records):g} {NAMES[0]}, {_return(want_records):g} {NAMES[1]}"
    split = next((i for i, (a, b) in enumerate(zip(got_actions, want_actions, strict=False)) if a != b), None)
    if split is not None:
        # the env's answers up to the step where the actions part (a policy acts on what it sees)
        seen = first_difference(got_records[: split + 1], want_records[: split + 1], NAMES)
        if seen is not None:
            return f"{seen} ({returns})"
        return (
            f"{who} chose {got_actions[split]!r} at step {split + 1} {NAMES[0]} and "
            f"{want_actions[split]!r} {NAMES[1]}, after the same observations: state that reset "
            f"keeps, read by {who} (or {who} is not deterministic) ({returns})"
        )
    seen = first_difference(got_records, want_records, NAMES)
    return None if seen is None else f"{seen} ({returns})"


def _return(records: list[Any]) -> float:
    return math.fsum(float(record[1]) for record in records[1:])
