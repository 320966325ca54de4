"""Evaluation: run a policy on envs' splits, n samples per task, and score it.

Scores are over episodes that ran to an end; an episode whose env (or policy backend) failed is
counted under ``errors`` and left out (the reference scored them 0, as if the agent had failed).
An episode whose return leaves its env's declared ``reward_range`` is counted under
``out_of_range``, listed (``out_of_range_episodes``) and left out too: the env broke its contract,
and averaging such a return in gives an Avg@n no other run can be compared with (a success paid on
top of partial credit once reported 1.372 on a [0, 1] env). ``agentgym eval`` warns and exits 3.

- ``success``: fraction of episodes that succeeded;
- ``avg`` (Avg@n): mean episode return;
- ``pass`` (Pass@n): fraction of tasks with at least one success among their n samples;
- ``mean_turns``, ``terminations`` (counts, errors included), and the same per category.

``reflexion``: after a failed trial the agent writes a short reflection, prepended to the next
trial of the same task (and sample), for up to ``trials`` trials; a task counts as solved if any
trial succeeded. ``trial_success`` gives the success rate after each trial.

Resuming (``played``, react only): the episodes an interrupted run of the same evaluation finished
are not played again and count as if played now, so the report is the one an uninterrupted run
gives (each episode samples from its own stream, seeded from its place in the task list); the
report's times cover this run's episodes only.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentgym.errors import UnknownNameError
from agentgym.plugins import get_env_spec
from agentgym.prompting import REFLECTION_PROMPT
from agentgym.trajectory import Episode, read_episodes, write_episodes
from agentgym_train.models.checkpoint import append_line, atomic_write
from agentgym_train.policies.base import Policy, Request, Sampling, generate
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs, make_backend
from agentgym_train.rollout.tasks import split_ids

STRATEGIES = ("react", "reflexion")


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


#: A rounding error in a sum of rewards is not a return outside the range.
RANGE_TOLERANCE = 1e-9


def outside(episode: Episode, reward_range: tuple[float, float] | None) -> bool:
    """Whether an episode that ran to an end returned outside ``reward_range``."""
    if reward_range is None or episode.termination == "error":
        return False
    low, high = reward_range
    tolerance = RANGE_TOLERANCE * max(1.0, high - low)
    return not low - tolerance <= episode.return_ <= high + tolerance


def score(episodes: Sequence[Episode], reward_range: tuple[float, float] | None = None) -> dict[str, Any]:
    """Metrics of one group of episodes (an env, or one of its categories); with ``reward_range``,
    episodes that returned outside it are counted under ``out_of_range`` and left out, as errors are.
    """
    broken = [e for e in episodes if outside(e, reward_range)]
    ok = [e for e in episodes if e.termination != "error" and not outside(e, reward_range)]
    by_task: dict[int, list[Episode]] = defaultdict(list)
    for e in ok:
        by_task[e.task_id].append(e)
    terminations: dict[str, int] = defaultdict(int)
    for e in episodes:
        terminations[e.termination or "error"] += 1
    return {
        "tasks": len({e.task_id for e in episodes}),
        "episodes": len(episodes),
        "errors": sum(e.termination == "error" for e in episodes),
        "out_of_range": len(broken),
        "success": _mean([float(e.success) for e in ok]),
        "avg": _mean([e.return_ for e in ok]),
        "pass": _mean([float(any(x.success for x in eps)) for eps in by_task.values()]),
        "mean_turns": _mean([float(e.num_turns) for e in ok]),
        "terminations": dict(sorted(terminations.items())),
    }


def env_report(
    episodes: Sequence[Episode], split: str, n: int, reward_range: tuple[float, float] | None = None
) -> dict[str, Any]:
    """One env's report: its scores, per category too; with ``reward_range``, the range and the
    episodes that returned outside it (``out_of_range_episodes``: task id, sample, return)."""
    report = {"split": split, "n": n, **score(episodes, reward_range)}
    cats: dict[str, list[Episode]] = defaultdict(list)
    for e in episodes:
        cats[e.category or "-"].append(e)
    report["categories"] = {
        c: {
            k: v
            for k, v in score(eps, reward_range).items()
            if k in ("tasks", "episodes", "errors", "out_of_range", "success", "avg", "pass")
        }
        for c, eps in sorted(cats.items())
    }
    if reward_range is not None:
        report["reward_range"] = list(reward_range)
        report["out_of_range_episodes"] = [
            {"task_id": e.task_id, "sample": e.sample, "return": e.return_}
            for e in episodes
            if outside(e, reward_range)
        ]
    return report


async def _reflect(policy: Policy, episodes: Sequence[Episode], chat: Any, sampling: Sampling) -> list[str]:
    requests = []
    for ep in episodes:
        messages = [{"role": m.role, "content": m.content} for m in ep.messages]
        messages.append({"role": "user", "content": REFLECTION_PROMPT})
        requests.append(
            Request(messages=messages, prompt_ids=chat.start(messages) if chat is not None else None)
        )
    gens = await generate(policy, requests, sampling)
    return [g.text.strip() if g.error is None else "" for g in gens]


async def _run_env(
    engine: RolloutEngine, tasks: list[Task], strategy: str, trials: int
) -> tuple[list[Episode], list[float]]:
    """Run ``tasks``; with reflexion, rerun failed ones with a reflection, up to ``trials`` trials."""

    def success_rate(episodes: list[Episode]) -> float:
        return _mean([float(e.success) for e in episodes if e.termination != "error"])

    try:
        episodes = await engine.arun(tasks)
        trial_success = [success_rate(episodes)]
        for _ in range(trials - 1 if strategy == "reflexion" else 0):
            retry = [i for i, e in enumerate(episodes) if not e.success and e.termination != "error"]
            if not retry:
                break
            notes = await _reflect(engine.policy, [episodes[i] for i in retry], engine.chat, engine.sampling)
            for i, note in zip(retry, notes, strict=True):
                t = tasks[i]
                tasks[i] = Task(
                    t.env, t.task_id, sample=t.sample, split=t.split, reflections=(*t.reflections, note)
                )
            for i, ep in zip(retry, await engine.arun([tasks[i] for i in retry]), strict=True):
                episodes[i] = ep
            trial_success.append(success_rate(episodes))
        return episodes, trial_success
    finally:
        await engine.aclose()


def evaluate(
    envs: Sequence[str],
    policy: Policy,
    *,
    split: str = "test",
    n: int = 1,
    max_turns: int | None = None,
    urls: Sequence[str] = (),
    token: str | None = None,
    batch_size: int = 64,
    sampling: Sampling | None = None,
    strategy: str = "react",
    trials: int = 3,
    limit: int | None = None,
    env_threads: int = 1,
    on_episode: Callable[[Episode], None] | None = None,
    max_context: int | None = None,
    task_ids: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
    max_instances: int | None = None,
    episode_seed: int | None = None,
    played: Sequence[Episode] = (),
    **engine_options: Any,
) -> tuple[dict[str, Any], list[Episode]]:
    """Evaluate ``policy`` on ``split`` of each env; returns the report and every episode.

    ``max_context``: an episode whose token sequence would outgrow it ends (a truncation, like the
    turn cap), for models with a small context window. ``task_ids``: evaluate these ids of
    ``split`` (in every env, or per env) instead of its first ``limit`` ones, e.g. a held-out dev set.
    ``max_instances``: env instances held at once per env in-process (default: the bound from the
    env's cost and the machine); episodes beyond it wait. ``episode_seed`` (default:
    ``sampling.seed``): every episode samples from its own stream seeded from it (see
    ``RolloutEngine``), so the scores do not depend on the batch size or the instance bound.
    ``engine_options``: more ``RolloutEngine`` options, e.g. ``match_actions``, ``format_hint`` (off;
    with ``match_actions`` each env's report counts its turns matched from free text).
    ``played``: the episodes an interrupted run of this evaluation finished (see the module's doc)."""
    if strategy not in STRATEGIES:
        raise UnknownNameError(kind="strategy", name=strategy, known=STRATEGIES)
    if played and strategy != "react":  # a reflexion trial depends on the trials before it
        raise ValueError(f"played episodes resume a react evaluation, not {strategy}")
    sampling = sampling or Sampling()
    report: dict[str, Any] = {"policy": policy.name, "strategy": strategy, "envs": {}}
    all_episodes: list[Episode] = []
    ids = _ids_of(envs, split, limit, task_ids)  # bad input fails before any work
    for name in envs:
        spec = get_env_spec(name)
        backend = make_backend(spec, urls, token=token, threads=env_threads, max_instances=max_instances)
        engine = RolloutEngine(
            policy,
            {name: backend},
            sampling=sampling,
            max_turns=max_turns or spec.default_max_turns,
            batch_size=batch_size,
            on_episode=on_episode,
            max_context=max_context,
            episode_seed=episode_seed if episode_seed is not None else sampling.seed,
            **engine_options,
        )
        report["envs"][name], episodes = _evaluate_env(engine, ids[name], split, n, strategy, trials, played)
        all_episodes += episodes
    return report, all_episodes


def _ids_of(
    envs: Sequence[str],
    split: str,
    limit: int | None,
    task_ids: Sequence[int] | Mapping[str, Sequence[int]] | None,
) -> dict[str, list[int]]:
    """Each env's task ids to evaluate: ``task_ids`` (the same in every env, or per env), else the
    first ``limit`` of ``split``."""
    if task_ids is not None and not isinstance(task_ids, Mapping):
        task_ids = dict.fromkeys(envs, task_ids)
    return {e: list(task_ids[e]) if task_ids is not None else split_ids(e, split, limit) for e in envs}


def _evaluate_env(
    engine: RolloutEngine,
    task_ids: list[int],
    split: str,
    n: int,
    strategy: str,
    trials: int,
    played: Sequence[Episode],
) -> tuple[dict[str, Any], list[Episode]]:
    """Run ``n`` samples of each of ``task_ids`` on the engine's one env, but those ``played`` already
    (by task id and sample); its report (scores, timings, instances, returns outside the env's reward
    range) and episodes, in task order."""
    import asyncio

    t0 = time.perf_counter()
    (backend,) = engine.backends.values()
    tasks = [Task(backend.spec.name, t, sample=k, split=split) for t in task_ids for k in range(n)]
    before = {(e.task_id, e.sample): e for e in played if e.env == backend.spec.name}
    todo = [replace(t, position=i) for i, t in enumerate(tasks) if (t.task_id, t.sample) not in before]
    new, trial_success = asyncio.run(_run_env(engine, todo, strategy, trials))
    ended = {**before, **{(e.task_id, e.sample): e for e in new}}
    episodes = [ended[t.task_id, t.sample] for t in tasks]
    reward_range = backend.spec.reward_range if tasks else None
    report = env_report(episodes, split, n, reward_range)
    report["max_turns"] = engine.max_turns
    report["wall_s"] = round(time.perf_counter() - t0, 3)
    report["generate_s"] = round(engine.stats.generate_s, 3)
    report["env_s"] = round(engine.stats.env_s, 3)
    if len(episodes) > len(new):
        report["resumed_episodes"] = len(episodes) - len(new)
    if isinstance(backend, LocalEnvs):
        report["max_instances"] = backend.bound.limit
        report["instances_made"] = backend.made
    if engine.match_actions:
        report["matched_actions"] = sum(bool(s.info.get("matched_action")) for e in episodes for s in e.steps)
    if strategy == "reflexion":
        report["trial_success"] = trial_success
    return report, episodes


def episodes_path(report_path: str | Path) -> Path:
    """Where the episodes of a report are written: ``r.json`` -> ``r.episodes.jsonl``."""
    p = Path(report_path)
    return p.with_name(p.stem + ".episodes.jsonl")


def kept_episodes(partial: Path) -> tuple[list[Episode], Callable[[Episode], None]]:
    """The episodes an interrupted evaluation kept in ``partial``, and the ``on_episode`` that keeps
    each new one there as it ends: ``evaluate(played=..., on_episode=...)`` then plays the rest
    (delete the file once the evaluation is saved). An episode that ended in an error is played
    again (its cause, an outage, has likely passed); the file is rewritten with the kept ones
    first, so that a line a kill tore is not followed by the next episode's."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    played = []
    if partial.is_file():
        played = [e for e in read_episodes(partial) if e.termination != "error"]
        atomic_write(partial, lambda tmp: write_episodes(tmp, played))

    def keep(episode: Episode) -> None:
        append_line(partial, episode.to_json())

    return played, keep


def save(report: dict[str, Any], episodes: Sequence[Episode], output: str | Path) -> tuple[Path, Path]:
    import json

    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    ep_path = episodes_path(out)
    write_episodes(ep_path, episodes)
    return out, ep_path
