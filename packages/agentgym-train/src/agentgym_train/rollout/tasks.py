"""Which tasks a run plays: an env split's task ids (optionally some categories only) and the
demonstrations' share of them. The training draw is :mod:`agentgym_train.rollout.task_sampling`."""

from __future__ import annotations

import itertools
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


def spread_ids(env: str, split: str, k: int) -> list[int]:
    """``k`` task ids of ``env``'s ``split`` spread evenly over it with its ids grouped by category
    (every len/k-th), so that each category has about its share of the subset (BabyAI's test ids
    interleave the levels, TextCraft's and SciWorld's come sorted by category): the learning
    curve's tasks, and the validation's under ``val_limit``."""
    part = get_split(env, split)
    ids = list(part.task_ids)
    if k >= len(ids):
        return ids
    order = {c: i for i, c in enumerate(part.categories)}
    ids.sort(key=lambda t: order.get(part.category_of(t) or "", len(order)))  # stable: ids in order within
    return sorted(ids[i * len(ids) // k] for i in range(k))


def demo_levels(env: str = "babyai") -> list[str]:
    """``env``'s train categories that its test split covers, in the train split's order: the
    demos train on those (BabyAI: the GoTo*, Pickup, UnblockPickup, PickupLoc, ActionObjDoor,
    FindObjS7, OneRoomS20 and SynthLoc levels, on their train seeds 0-9999, never the test seeds;
    TextCraft: every depth).

    Read from the installed env's spec (this package does not import the env's): BabyAI numbers
    a task ``seed * 40 + level`` in both splits, so the train split's ``category_fn`` (a task's
    level) names the level of a test task too; an env without one names its test categories
    like its train ones."""
    splits = get_env_spec(env).splits
    train, test = splits["train"], splits["test"]
    if train.category_fn is not None:
        levels = {train.category_fn(t) for t in test.task_ids}
    elif test.categories:
        levels = set(test.categories)
    else:
        raise LookupError(f"the {env} splits name no categories (no category_fn, no categories)")
    return [level for level in train.categories if level in levels]


def demo_ids(env: str, tasks: int) -> list[int]:
    """``tasks`` train ids of ``env`` taken in turn from each of its demo categories (each one's in
    ascending order), so that a split sorted by category (TextCraft's by depth) gives every
    category its share. BabyAI's ids interleave its levels already: there it is their ascending
    order."""
    known = get_split(env, "train").categories
    columns = itertools.zip_longest(*(sorted(known[c]) for c in demo_levels(env)))
    return [t for row in columns for t in row if t is not None][:tasks]
