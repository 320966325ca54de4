"""The kit's check that a task id outside the env's declared tasks is refused, not wrapped around
onto another task (``task_id % len(tasks)``): the first id past the largest declared one, and a large
one, must raise a ``ValueError`` that names the id (``agentgym.errors.UnknownTaskError`` is one, and
``TextEnv.reset`` raises it for an id in no split), in-process and over HTTP. An env whose every id
is a task declares ``EnvSpec.open_task_ids`` and is exempt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentgym.spec import EnvSpec
from agentgym.testing.config import Plan

FIX = (
    "refuse ids that no split declares (TextEnv.reset raises agentgym.errors.UnknownTaskError for them "
    "unless reset or check_task_id is overridden to let them through; never map an id onto a task "
    "with task_id % len(tasks)), or declare EnvSpec(open_task_ids=True) if every id >= 0 is a task"
)


def _largest(ids: Sequence[int]) -> int:
    if isinstance(ids, range):
        return ids[-1] if ids.step > 0 else ids[0]
    return max(ids)


def undeclared_ids(spec: EnvSpec) -> tuple[list[int], int] | None:
    """Two ids no split declares (the first past the largest, and a large one) and the largest
    declared; ``None`` where every id is a task or the spec declares no task."""
    if getattr(spec, "open_task_ids", False):
        return None
    declared = [split.task_ids for split in spec.splits.values() if len(split.task_ids)]
    if not declared:
        return None
    largest = max(_largest(ids) for ids in declared)
    return [largest + 1, max(10**9 + 7, largest * 1000 + 7)], largest


def _skip_reason(spec: EnvSpec) -> str:
    if getattr(spec, "open_task_ids", False):
        return f"{spec.name} declares open_task_ids: every task id >= 0 is a task"
    return f"{spec.name} declares no task id (no split)"


def tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    import pytest

    spec = plan.spec

    def test_undeclared_task_ids_are_refused() -> None:
        found = undeclared_ids(spec)
        if found is None:
            pytest.skip(_skip_reason(spec))
        bad_ids, largest = found
        env = spec.make()
        try:
            problems = [p for p in (_refusal_problem(env, t, largest) for t in bad_ids) if p]
        finally:
            env.close()
        assert not problems, "\n".join([*problems, f"To fix: {FIX}"])

    return {"test_undeclared_task_ids_are_refused": test_undeclared_task_ids_are_refused}


def _refusal_problem(env: Any, task_id: int, largest: int) -> str | None:
    what = f"reset to task id {task_id} (the largest declared id is {largest})"
    try:
        observation, info = env.reset(options={"task_id": task_id})
    except ValueError as exc:
        if str(task_id) not in str(exc):
            return f"{what} raised {type(exc).__name__} without naming the id: {str(exc)[:300]!r}"
        return None
    except Exception as exc:
        return (
            f"{what} raised {type(exc).__name__}: {str(exc)[:300]!r}, not a ValueError naming the id "
            "(over HTTP any other exception reads as the env crashing and closes the session)"
        )
    return f"{what} returned a task instead of refusing the id: {str(observation)[:200]!r}"


def http_tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    import pytest

    spec = plan.spec

    def test_undeclared_task_ids_are_refused_over_http(conformance_url: str) -> None:
        from agentgym.client import RemoteEnv
        from agentgym.errors import AgentGymError

        found = undeclared_ids(spec)
        if found is None:
            pytest.skip(_skip_reason(spec))
        bad_ids, largest = found
        problems = []
        for task_id in bad_ids:
            remote = RemoteEnv(conformance_url, plan.config.env)
            try:
                remote.reset(options={"task_id": task_id})
                problems.append(f"the served env reset to task id {task_id} (largest declared {largest})")
            except AgentGymError as exc:
                if exc.status >= 500 or str(task_id) not in exc.message:
                    problems.append(
                        f"the served env answered a reset to task id {task_id} with {exc.code} "
                        f"(HTTP {exc.status}): {exc.message[:300]!r}; a refusal names the id with a 4xx"
                    )
            finally:
                remote.close()
        problems += _session_kept(conformance_url, plan.config.env, _first(spec), bad_ids[0])
        assert not problems, "\n".join([*problems, f"To fix: {FIX}"])

    return {"test_undeclared_task_ids_are_refused_over_http": test_undeclared_task_ids_are_refused_over_http}


def _first(spec: EnvSpec) -> int:
    return min(min(split.task_ids) for split in spec.splits.values() if len(split.task_ids))


def _session_kept(url: str, env: str, good: int, bad: int) -> list[str]:
    """A session whose reset to ``bad`` is refused keeps its episode: it still steps (the server
    keeps serving it, and every other)."""
    from agentgym.client import RemoteEnv
    from agentgym.errors import AgentGymError

    remote = RemoteEnv(url, env)
    try:
        remote.reset(options={"task_id": good})
        try:
            remote.reset(options={"task_id": bad})
        except AgentGymError:
            pass
        remote.step("an action the env may refuse")
    except AgentGymError as exc:
        return [
            f"after a refused reset to task id {bad}, its session no longer steps: {exc.code}: {exc.message[:300]}"
        ]
    finally:
        remote.close()
    return []
