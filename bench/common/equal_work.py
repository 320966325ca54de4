"""What each side of a comparison did, and whether two sides did the same work.

Every bench that sets two things side by side (two samplers, two trainers, two backends) records,
for each side, the episodes it ran, the turns, the tokens it sampled and trained on, and its
errors, and prints a ratio only when both sides ran without errors and each of those counts
agrees within a stated tolerance. A ratio of two timings of different work says nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: The counts compared between the two sides, in the order the tables show them.
WORK_KEYS = ("episodes", "turns", "sampled_tokens", "trained_tokens")
#: An env bench's counts: episodes run, ``reset`` and ``step`` calls made (counted where they are made).
ENV_WORK_KEYS = ("episodes", "resets", "steps")
#: Relative difference allowed between two sides' counts (sampling at temperature 1 on two
#: backends never draws the same tokens, so exact equality is asked only where decoding is greedy).
TOLERANCE = 0.10


def work_of_episodes(episodes: Iterable[Any]) -> dict[str, int]:
    """The work in ``episodes`` (Episode objects or their JSON dicts): sampled tokens are the
    loss-masked ids; trained tokens those of the episodes that ended without an error (the ones an
    update trains on)."""
    out = dict.fromkeys((*WORK_KEYS, "errors"), 0)
    for ep in episodes:
        ep = ep if isinstance(ep, Mapping) else ep.model_dump(by_alias=True)
        sampled = sum((ep.get("tokens") or {}).get("loss_mask") or [])
        error = ep.get("termination") == "error"
        out["episodes"] += 1
        out["turns"] += int(ep.get("num_turns") or 0)
        out["sampled_tokens"] += sampled
        out["trained_tokens"] += 0 if error else sampled
        out["errors"] += int(error)
    return out


def work_of_run(run: Path) -> dict[str, int]:
    """The work of a training run's steps (``episodes/step_*.jsonl``, which the native trainer and
    the verl backend both write); validation episodes are not counted."""
    episodes = [
        json.loads(line)
        for f in sorted((Path(run) / "episodes").glob("step_*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    return work_of_episodes(episodes)


def differences(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    tolerance: float = TOLERANCE,
    names: tuple[str, str] = ("A", "B"),
    keys: tuple[str, ...] = WORK_KEYS,
) -> list[str]:
    """Why ``a`` and ``b`` (sides called ``names``) are not the same work: one line per side whose
    process failed or that had errors, and one per count in ``keys`` (a model's work by default; an
    env bench passes its own, such as episodes and steps) that differs by more than ``tolerance``
    (relative to the larger); empty when they are the same work."""
    sides = list(zip(names, (a, b), strict=True))
    # a side whose process failed (``status``, as ``procs.timed`` records it) did no
    # known work at all
    why = [f"{name} exited with {w['status']}" for name, w in sides if w.get("status")]
    why += [f"{name} had {w['errors']} error(s)" for name, w in sides if w.get("errors")]
    for key in keys:
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            continue
        if abs(x - y) > tolerance * max(abs(x), abs(y), 1):
            why.append(f"{key}: {x} vs {y} (more than {tolerance:.0%} apart)")
    return why


def ratio_of(num: float | None, den: float | None, why: list[str]) -> float | str:
    """``num / den`` when the work was equal (``why`` empty), else why there is no ratio."""
    if why:
        return f"not the same work ({'; '.join(why)})"
    if not num or not den:
        return "a side has no figure"
    return num / den


def ratio_line(label: str, num: float | None, den: float | None, why: list[str]) -> str:
    """``ratio LABEL: X`` when the work was equal, else the line that says why there is none."""
    ratio = ratio_of(num, den, why)
    return f"no ratio {label}: {ratio}" if isinstance(ratio, str) else f"ratio {label}: {ratio:.3f}"
