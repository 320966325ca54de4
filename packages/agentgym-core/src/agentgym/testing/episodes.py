"""The kit's episodes: the expert's, random and fuzzed ones, replays; their records in canonical form,
where two runs first differ, and whether a return leaves the env's declared reward range."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from agentgym.env import TextEnv
from agentgym.spec import EnvSpec

#: Tried by random episodes where the env lists no actions (with the actions of its prompt's example).
GENERIC_ACTIONS = (
    "look",
    "inventory",
    "help",
    "wait",
    "done",
    "yes",
    "no",
    "1",
    "go north",
    "take key",
    "open door",
    "check valid actions",
)
#: A rounding error in a sum of rewards is not a return outside the range.
RANGE_TOLERANCE = 1e-9


def canon(value: Any) -> Any:
    """``value`` as JSON would carry it, keys sorted: records of two runs compare with ``==``."""
    from agentgym.protocol import jsonable

    return json.loads(json.dumps(jsonable(value), sort_keys=True))


def run_expert(
    spec: EnvSpec, env: TextEnv, task_id: int, max_turns: int
) -> tuple[list[str], list[tuple], bool]:
    """Play the expert on ``task_id``; returns (actions, step records, success)."""
    observation, info = env.reset(options={"task_id": task_id})
    act = spec.make_expert(env)
    actions, records = [], []
    for _ in range(max_turns):
        action = act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        records.append((observation, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return actions, records, bool(info.get("success"))


def run_actions(env: Any, task_id: int, actions: Sequence[str]) -> list[Any]:
    """Reset to ``task_id`` and apply ``actions`` (stopping at the episode's end); canonical records."""
    observation, info = env.reset(options={"task_id": task_id})
    records: list[Any] = [canon([observation, info])]
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        records.append(canon([observation, reward, terminated, truncated, info]))
        if terminated or truncated:
            break
    return records


def why(records: list[tuple], max_turns: int) -> str:
    """How an expert's episode ended without success: termination and the last observation."""
    if not records:
        return "no step was taken"
    observation, _, terminated, truncated, info = records[-1]
    if terminated:
        ending = "terminated without success (failure)"
    elif truncated:
        ending = "truncated by the env"
    else:
        ending = f"still going after expert_max_turns={max_turns} turns"
    invalid = sum(1 for r in records if r[4].get("valid_action") is False)
    extra = f"; {invalid} invalid action(s)" if invalid else ""
    return f"{ending} after {len(records)} step(s){extra}; last observation: {observation[-300:]!r}"


def prompt_actions(spec: EnvSpec) -> list[str]:
    """The actions the spec's prompt shows (its example), read by the spec's action parser."""
    from agentgym.parsers import PARSERS

    if spec.action_parser not in ("react", "tags"):
        return []  # a fenced or plain parser would read any line of the prompt as an action
    parse = PARSERS[spec.action_parser]
    found = (parse(line) for line in spec.prompt.splitlines() if line.strip())
    return list(dict.fromkeys(r.action for r in found if r.ok and r.action))[:20]


def random_policy(
    spec: EnvSpec, rng: random.Random, fuzz: Sequence[str] = ()
) -> Callable[[str, dict[str, Any]], str]:
    """A policy of random actions: mostly one the env lists (where it lists any), else a generic
    one or one of the prompt's example; with ``fuzz``, about one in three from ``fuzz`` (invalid)."""
    pool = [*GENERIC_ACTIONS, *prompt_actions(spec)]

    def act(observation: str, info: dict[str, Any]) -> str:
        listed = list(info.get("available_actions") or [])
        if fuzz and rng.random() < 1 / 3:
            return rng.choice(list(fuzz))
        if listed and rng.random() < 0.9:
            return rng.choice(listed)
        return rng.choice(pool)

    return act


def play(
    env: Any, task_id: int, policy: Callable[[Any], Callable[[str, dict[str, Any]], str]], max_turns: int
) -> tuple[list[str], list[Any]]:
    """Reset to ``task_id`` and let ``policy(env)`` (made after the reset, as the expert is) act until
    the episode ends or ``max_turns``; returns (actions, canonical records: the reset's, then each step's)."""
    observation, info = env.reset(options={"task_id": task_id})
    act = policy(env)
    actions: list[str] = []
    records: list[Any] = [canon([observation, info])]
    for _ in range(max_turns):
        action = act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        records.append(canon([observation, reward, terminated, truncated, info]))
        if terminated or truncated:
            break
    return actions, records


def random_episode(
    spec: EnvSpec,
    env: TextEnv,
    task_id: int,
    max_turns: int,
    rng: random.Random,
    fuzz: Sequence[str] = (),
) -> tuple[list[str], list[float]]:
    """An episode of ``random_policy``; returns (actions, rewards)."""
    actions, records = play(env, task_id, lambda _env: random_policy(spec, rng, fuzz), max_turns)
    return actions, [float(record[1]) for record in records[1:]]


def return_problem(spec: EnvSpec, rewards: Sequence[float]) -> str | None:
    """Why an episode with these step rewards breaks ``spec.reward_range`` (``None`` if it keeps to
    it). Every prefix counts: a rollout's turn cap can end the episode after any step."""
    low, high = spec.reward_range
    tolerance = RANGE_TOLERANCE * max(1.0, high - low)
    for i in range(len(rewards)):
        total = math.fsum(rewards[: i + 1])
        if not low - tolerance <= total <= high + tolerance:
            shown = ", ".join(f"{r:g}" for r in rewards[: i + 1][-12:])
            where = "above" if total > high else "below"
            hint = (
                "a success paid on top of partial credit? Pay the remainder instead "
                "(reward = env.reward_to(1.0)), cap the partial credit,"
                if total > high
                else "a penalty that adds up (per invalid action, per step)? Keep the sum in the range,"
            )
            return (
                f"the return reached {total:g} after step {i + 1} (last rewards: {shown}), {where} the "
                f"declared reward_range ({low:g}, {high:g}): {hint} or declare the range the env pays "
                "(EnvSpec.reward_range)"
            )
    return None


_STEP_FIELDS = ("observation", "reward", "terminated", "truncated", "info")


def first_difference(
    got: list[Any], want: list[Any], names: tuple[str, str] = ("here", "in the reference run")
) -> str | None:
    """Where two runs' canonical records (``run_actions``') first differ, readably, each run's value
    followed by its name in ``names``; ``None`` if they are equal."""
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        parts = ("observation", "info") if i == 0 else _STEP_FIELDS
        for name, x, y in zip(parts, a, b, strict=False):
            where = _where(x, y)
            if where is not None:
                step = "reset" if i == 0 else f"step {i}"
                path, x, y = where
                here, there = _pair(x, y)
                return f"{step}, {name}{path}: {here} {names[0]}, {there} {names[1]}"
    if len(got) != len(want):
        return f"{len(got) - 1} step(s) {names[0]}, {len(want) - 1} {names[1]}"
    return None


def _where(x: Any, y: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if x == y:
        return None
    if isinstance(x, dict) and isinstance(y, dict):
        for key in sorted(set(x) | set(y)):
            if x.get(key, "<missing>") != y.get(key, "<missing>"):
                return _where(x.get(key, "<missing>"), y.get(key, "<missing>"), f"{path}[{key!r}]")
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for k, (a, b) in enumerate(zip(x, y, strict=True)):
            if a != b:
                return _where(a, b, f"{path}[{k}]")
    return path, x, y


def _pair(x: Any, y: Any, limit: int = 160) -> tuple[str, str]:
    """Two differing values, short; of two strings, the stretch where they start to differ."""
    if isinstance(x, str) and isinstance(y, str):
        at = next((i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b), min(len(x), len(y)))
        start = max(0, at - 40)
        cut = [("..." if start else "") + repr(s[start : start + limit]) for s in (x, y)]
        return cut[0], cut[1]
    texts = [repr(v) for v in (x, y)]
    return texts[0][:limit], texts[1][:limit]
