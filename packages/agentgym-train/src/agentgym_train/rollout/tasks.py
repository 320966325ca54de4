"""Which tasks a run plays: an env split's task ids (optionally some categories only), and the
training sampler that draws them step after step (its position is part of a checkpoint)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from agentgym.errors import UnknownNameError
from agentgym.plugins import get_env_spec
from agentgym.spec import Split


def get_split(env: str, split: str) -> Split:
    """``env``'s split ``split``; an unknown env or split names the known ones."""
    spec = get_env_spec(env)
    if split not in spec.splits:
        message = f"env {env!r} has no split {split!r} (has: {', '.join(spec.splits)})"
        raise UnknownNameError(message, kind="split", name=split, known=spec.splits)
    return spec.splits[split]


def split_ids(env: str, split: str, limit: int | None = None) -> list[int]:
    """The first ``limit`` task ids of ``env``'s ``split`` (all without a limit)."""
    return list(get_split(env, split).task_ids[:limit])


def category_ids(
    env: str, split: str, categories: Sequence[str] | None, limit: int | None = None
) -> list[int]:
    """Task ids of ``split`` in any of ``categories`` (all without), ascending, the first ``limit``."""
    if not categories:
        return split_ids(env, split, limit)
    known = get_split(env, split).categories
    ids = sorted({t for c in categories if c in known for t in known[c]})
    return ids[:limit]


class TaskSampler:
    """Train tasks drawn uniformly: an env, then a task id of its split (in the chosen categories).
    Its state is saved in checkpoints (the data position)."""

    def __init__(
        self,
        envs: Sequence[str],
        split: str,
        limit: int | None,
        seed: int,
        categories: Sequence[str] | None = None,
    ):
        self.ids = {env: category_ids(env, split, categories, limit) for env in envs}
        self.envs = list(envs)
        self.rng = random.Random(seed)

    def draw(self, k: int) -> list[tuple[str, int]]:
        out = []
        for _ in range(k):
            env = self.envs[self.rng.randrange(len(self.envs))]
            ids = self.ids[env]
            out.append((env, ids[self.rng.randrange(len(ids))]))
        return out
