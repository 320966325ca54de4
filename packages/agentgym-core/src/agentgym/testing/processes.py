"""The kit's check that a task is the same in every Python process: the reset of a sample of task
ids, and the expert's return on a few, built again in a second process with another
``PYTHONHASHSEED`` and compared with this process's. It catches tasks drawn from
``random.Random(hash(name))`` or built by iterating over a set of strings, which change from one
process to the next (a server's workers, a rerun) while every in-process check passes.

The second process runs ``main``: ``python -c 'from agentgym.testing.processes import main; main()'
ARGS OUTPUT``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgym.testing.config import Plan
from agentgym.testing.episodes import canon, first_difference, run_expert

#: Seconds the second process may take (it imports the env and makes one instance).
TIMEOUT_S = 900
#: Expert episodes compared between the processes.
EXPERT_IDS = 3


def tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    def test_tasks_are_the_same_in_another_process() -> None:
        problems = process_problems(plan)
        assert not problems, "\n".join(problems)

    return {"test_tasks_are_the_same_in_another_process": test_tasks_are_the_same_in_another_process}


def task_prints(env: str, ids: list[int], expert_ids: list[int], turns: int) -> dict[str, Any]:
    """What the tasks look like in this process, in one fresh instance: each id's reset (canonical)
    and the expert's return, success and steps on ``expert_ids``."""
    from agentgym.plugins import get_env_spec

    spec = get_env_spec(env)
    instance = spec.make()
    try:
        resets = {str(t): canon(instance.reset(options={"task_id": t})) for t in ids}
        experts = {}
        for t in expert_ids:
            actions, records, success = run_expert(spec, instance, t, turns)
            experts[str(t)] = {
                "return": math.fsum(float(r[1]) for r in records),
                "success": success,
                "steps": len(actions),
            }
    finally:
        instance.close()
    return {"resets": resets, "experts": experts}


def other_hash_seed() -> str:
    """A ``PYTHONHASHSEED`` unlike this process's (a set one plus one; else this process drew a
    random seed, and 1 differs from it but by a 1 in 2**32 chance)."""
    mine = os.environ.get("PYTHONHASHSEED", "")
    return str((int(mine) + 1) % 2**32) if mine.isdigit() else "1"


def process_problems(plan: Plan) -> list[str]:
    """How the second process's tasks differ from this one's (empty when they do not)."""
    expert_ids = plan.ids[:EXPERT_IDS] if plan.spec.expert is not None else []
    args = {"env": plan.config.env, "ids": plan.ids, "expert_ids": expert_ids, "turns": plan.expert_turns}
    seed = other_hash_seed()
    with tempfile.TemporaryDirectory(prefix="agentgym-kit-") as tmp:
        child = _start(args, seed, Path(tmp))
        try:
            mine = task_prints(**args)  # while the second process builds its own
            theirs = _result(child, args["env"], seed, Path(tmp))
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    names = (f"in a process with PYTHONHASHSEED={seed}", "in this one")
    problems = []
    for t in plan.ids:
        difference = first_difference([theirs["resets"][str(t)]], [mine["resets"][str(t)]], names)
        if difference is not None:
            problems.append(f"task {t}: its reset differs between processes: {difference}")
    for t in expert_ids:
        a, b = theirs["experts"][str(t)], mine["experts"][str(t)]
        if a != b:
            problems.append(
                f"task {t}: the expert's episode differs between processes: {a} {names[0]}, {b} {names[1]}"
            )
    if problems:
        problems.append(
            "A task must depend on its id only, the same in every process: do not seed a generator "
            "from hash() of a str or tuple (it changes per process; seed from the id, or a stable digest "
            "such as zlib.crc32), and sort a set of strings before picking from it"
        )
    return problems


def _start(args: dict[str, Any], seed: str, tmp: Path) -> subprocess.Popen:
    """The second process, started: the same modules as this one (a conftest may have put some on
    ``sys.path``), another hash seed; its stderr to a file (a full pipe would block it)."""
    path = os.pathsep.join(p for p in [*sys.path, os.environ.get("PYTHONPATH", "")] if p)
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": path}
    code = "from agentgym.testing.processes import main; main()"
    with open(tmp / "stderr.txt", "w", encoding="utf-8") as stderr:
        return subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(args), str(tmp / "prints.json")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def _result(child: subprocess.Popen, env: str, seed: str, tmp: Path) -> dict[str, Any]:
    import pytest

    try:
        code = child.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"building {env}'s tasks in a second process took over {TIMEOUT_S}s; for an env that "
            "slow to start, set cross_process: False in agentgym_conformance"
        )
    out = tmp / "prints.json"
    if code != 0 or not out.exists():
        stderr = (tmp / "stderr.txt").read_text(encoding="utf-8", errors="replace")
        pytest.fail(
            f"building {env}'s tasks in a second process (PYTHONHASHSEED={seed}) failed (exit {code}):\n"
            f"{stderr[-3000:]}"
        )
    return json.loads(out.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> None:
    """The second process: ``ARGS`` (JSON: env, ids, expert_ids, turns) -> ``OUTPUT`` (JSON), a
    file, as the env may print on stdout."""
    raw, output = argv if argv is not None else sys.argv[1:]
    prints = task_prints(**json.loads(raw))
    Path(output).write_text(json.dumps(prints), encoding="utf-8")
