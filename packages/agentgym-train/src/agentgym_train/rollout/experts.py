"""The envs' experts at play: their episodes as text (what the tiny model's tokenizer learns from)
and as demonstrations (what SFT warm-starts on)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.plugins import get_env_spec
from agentgym.trajectory import read_episodes, write_episodes
from agentgym_train.policies import make_policy
from agentgym_train.policies.scripted import ScriptedPolicy
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs
from agentgym_train.rollout.tasks import demo_ids


def expert_texts(envs: Sequence[str], tasks_per_env: int = 100, max_turns: int | None = None) -> list[str]:
    """Texts of expert episodes on the first ``tasks_per_env`` ids of each env's train split."""
    texts: list[str] = []
    for name in envs:
        spec = get_env_spec(name)
        split = spec.splits.get("train") or next(iter(spec.splits.values()))
        ids = list(split.task_ids[:tasks_per_env])
        engine = RolloutEngine(
            ScriptedPolicy(), {name: LocalEnvs(spec)}, max_turns=max_turns or max(spec.default_max_turns, 50)
        )
        episodes = engine.run([Task(name, t, split="train") for t in ids])
        seen_system: set[str] = set()
        for ep in episodes:
            for m in ep.messages:
                if m.role == "system":
                    if m.content in seen_system:
                        continue
                    seen_system.add(m.content)
                texts.append(m.content)
    return texts


def collect_demos(path: Path, tasks: int, envs: Sequence[str] = ("babyai",)) -> list[Any]:
    """The expert's successful episodes on ``tasks`` train ids of each env's demo categories
    (``demo_ids``), written to ``path`` (read back when it exists)."""
    if path.is_file():
        return list(read_episodes(path))
    demos = []
    for env in envs:
        spec = get_env_spec(env)
        # the env's own cap, at least 20: SciWorld's expert takes up to 30 turns
        turns = max(spec.default_max_turns, 20)
        engine = RolloutEngine(make_policy("scripted"), {env: LocalEnvs(spec)}, max_turns=turns)
        demos += [
            e for e in engine.run([Task(env, i, split="train") for i in demo_ids(env, tasks)]) if e.success
        ]
    write_episodes(path, demos)
    return demos
