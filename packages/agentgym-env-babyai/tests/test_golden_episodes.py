"""The 300-task record: BabyAI's episodes pinned by one digest.

The level generation and scene were rewritten for speed (be9fcf1, 93d7f64) with the promise that
every episode stays byte-identical. This plays a fixed record (tasks 0-299, every level 7 or 8
times: the expert's episode, then a seeded random walk over the offered actions with an invalid
action now and then) and compares the sha256 of the canonical records (observation, reward, ends
and info, available actions included, after every step) to the digest the code gave before the
rewrite (dbc71de's agentgym_babyai, run by this same function) and gives now.
"""

from __future__ import annotations

import hashlib
import json
import random

import agentgym
from agentgym.testing.episodes import canon

#: sha256 of ``record()``: the same at dbc71de (the last commit before the rewrite), be9fcf1 and 93d7f64
GOLDEN = "64ff92abd2e384c0abdbb9a0de1bf1fbcc3709e7e463dd386c3d1b6241f72cea"
TASKS, EXPERT_TURNS, WALK_TURNS = 300, 64, 12


def _episode(spec, env, task_id: int, expert: bool) -> list:
    obs, info = env.reset(options={"task_id": task_id})
    act = spec.make_expert(env) if expert else None
    records = [canon([obs, info])]
    for _ in range(EXPERT_TURNS if expert else WALK_TURNS):
        if act is not None:
            action = act(obs, info)
        else:  # the walk: its choices depend on the offered actions, so they are pinned too
            rng = random.Random(task_id * 1000 + len(records))
            offered = info.get("available_actions") or []
            action = rng.choice(offered) if offered and rng.random() > 0.1 else "fly to the moon"
        obs, reward, terminated, truncated, info = env.step(action)
        records.append(canon([action, obs, reward, terminated, truncated, info]))
        if terminated or truncated:
            break
    return records


def record(tasks: int = TASKS) -> str:
    spec = agentgym.env_specs()["babyai"]
    env = spec.make()
    digest = hashlib.sha256()
    try:
        for task_id in range(tasks):
            expert, walk = (_episode(spec, env, task_id, e) for e in (True, False))
            digest.update(json.dumps([expert, walk], sort_keys=True, separators=(",", ":")).encode())
    finally:
        env.close()
    return digest.hexdigest()


def test_the_300_task_record_plays_byte_identical_episodes():
    assert record() == GOLDEN


def test_resets_from_the_cache_play_the_same_record(monkeypatch):
    """GRPO groups reset from one generated level (``agentgym.resets``): the record played with
    every reset after a task's first loaded from a copy, twice over (the second pass loads even the
    expert's episodes, from copies the first pass's episodes were played on), gives the digest."""
    from agentgym.resets import ResetCache

    cache = ResetCache(size=1024, save_after=1)  # saved at its first reset: the walk loads it
    monkeypatch.setattr("agentgym.env.RESETS", cache)
    assert record() == GOLDEN
    assert cache.saves == TASKS and cache.hits == TASKS
    assert record() == GOLDEN
    assert cache.hits == 3 * TASKS
