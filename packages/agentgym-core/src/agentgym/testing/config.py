"""The kit's options (``ConformanceConfig``) and its plan: the env's spec and the task ids it samples.

pytest is imported only where an option is refused, so that ``sample_ids`` serves scripts too."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from agentgym.plugins import get_env_spec
from agentgym.spec import EnvSpec

INVALID_ACTIONS = ("", "   ", "xyzzy plugh 42", "\x00\x01\x7f", "é🙂" * 20, "a" * 5000)
#: The expert's turns per task, by default, in units of the kit's turn cap (``max_turns``, by default
#: the env's ``default_max_turns``): the kit checks that tasks can be solved, and a scripted expert
#: may play one primitive move a turn where an agent plays a macro action. One default for both
#: front-ends: ``agentgym check`` and a conftest's ``agentgym_conformance`` give the expert the same.
EXPERT_TURNS_FACTOR = 30


@dataclass
class ConformanceConfig:
    """The kit's options (``agentgym_conformance = {"env": ..., option: value}``); the table in
    docs/env-contract.md lists them, and a test keeps the two in step."""

    env: str
    sample: int = 5  # task ids per split for determinism / HTTP / available-action checks
    expert_sample: int = 10  # task ids the expert must solve
    expert_min_success: float = 1.0
    max_turns: int | None = None  # default: the spec's default_max_turns
    expert_max_turns: int | None = None  # default: EXPERT_TURNS_FACTOR x max_turns
    min_distinct: float = 0.9  # fraction of sampled ids that must give distinct tasks
    invalid_actions: Sequence[str] = field(default_factory=lambda: INVALID_ACTIONS)
    available_actions: int = 20  # listed actions tried per sampled task (each must be valid)
    http: bool = True
    workers: int = 1
    random_episodes: int = 2  # random-action episodes per sampled task (every second one fuzzed)
    cross_process: bool = True  # rebuild tasks in a second process with another PYTHONHASHSEED

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


@dataclass(frozen=True)
class Plan:
    """What the suite's tests share: the options, the env's spec and the task ids they sample."""

    config: ConformanceConfig
    spec: EnvSpec
    ids: list[int]  # for determinism, invalid actions, listed actions, returns and HTTP parity
    expert_ids: list[int]  # for the expert's success rate
    reuse_ids: list[int]  # the test split's first: an instance reused for it must act as a fresh one
    turns: int  # turn cap of the kit's own episodes (random ones)
    expert_turns: int

    @classmethod
    def of(cls, config: ConformanceConfig) -> Plan:
        spec = get_env_spec(config.env)
        max_turns = config.max_turns or spec.default_max_turns
        per_split = max(1, config.expert_sample // max(1, len(spec.splits)))
        return cls(
            config=config,
            spec=spec,
            ids=sample_ids(spec, config.sample),
            expert_ids=sample_ids(spec, per_split)[: config.expert_sample],
            reuse_ids=sample_ids(spec, 1)[:1],
            turns=max_turns,
            expert_turns=config.expert_max_turns or EXPERT_TURNS_FACTOR * max_turns,
        )
