# AgentGym's conformance suite against the sciworld env. Gold paths run up to ~100 actions (longer than
# an agent's default turn cap), so the expert gets 150 turns. One id per split keeps the JVM starts
# (two per determinism check) and gold-path generations (up to seconds each) within the package's time
# budget; test_env.py checks determinism across reloads and the expert on more tasks.
agentgym_conformance = {"env": "sciworld", "sample": 1, "expert_sample": 2, "expert_max_turns": 150}

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

HERE = Path(__file__).parent
# Modules that run without Java (task ids, splits, the missing-Java error). Every other test here,
# the conformance suite included, runs the simulator: marker `java`, skipped with the reason when no
# Java runtime is found.
NO_JAVA_MODULES = {"test_tasks.py", "test_java.py"}


def _java_reason() -> str | None:
    from agentgym_sciworld.java import JavaNotFoundError, find_java

    try:
        find_java()
    except JavaNotFoundError as exc:
        return f"{exc.message} (CI installs one: .ci/run)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    checked = False
    for item in items:
        path = Path(str(item.path))
        if HERE not in path.parents:
            continue
        if path.name in NO_JAVA_MODULES:
            continue
        item.add_marker(pytest.mark.java)
        if not checked:
            reason, checked = _java_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
