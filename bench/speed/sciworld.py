"""SciWorld: step speed and JVM memory in-process and served, against the ``scienceworld`` package
called directly; and the expert on a fixed 40-task sample.

    python -m bench.speed.sciworld [--steps 500] [--workers 2] [--expert] [--skip-speed] [--tolerance 0]

Every mode replays the same expert actions of a fixed set of test tasks (every 10th: all five test
categories) until ``--steps`` steps have been taken; loads and resets are timed apart and left out
of steps/s. Each JVM first runs one untimed pass (class loading, JIT).

- ``agentgym_in_process`` (``agentgym.make("sciworld")``: serial collector, deterministic worlds)
  against ``raw_same_jvm_flags``: ``scienceworld.ScienceWorldEnv``'s own simulator object making the
  calls our step makes (step, score, completed), its JVM given our flags through
  ``JAVA_TOOL_OPTIONS``. This is what our wrapper costs;
- ``agentgym_in_process_nondeterministic`` (``deterministic=False, java_options=()``) against
  ``raw_scienceworld_defaults``: the same pair with the JVM as ``scienceworld`` starts it;
- each pair runs interleaved, task by task, so that the machine's load (another job on the same
  cores) falls on both alike; at most two JVMs run at a time;
- ``scienceworld_env_step``: ``ScienceWorldEnv.step`` as its README uses it, which also fetches the
  look, inventory, task and every valid action on each step (``--wrapper-steps``, fewer: it is slow);
- ``served_workers_N``: ``agentgym serve sciworld --workers N``, N sessions (one per worker)
  stepping at the same time over HTTP, one request per step.

Resident memory is each JVM's (``/proc/<pid>/status`` VmRSS) after its steps, and the worker
processes' when served. Prints one JSON object, then ratio lines (steps/s; 1.0 = no overhead),
first ``ratio agentgym_in_process/raw_same_jvm_flags: X``.

Each mode counts its own work where it does it: resets (task loads), steps (actions sent) and
errors (a call that raised; the mode goes on with the next task). A ratio is printed only when
both modes ran without errors and their resets and steps agree within ``--tolerance`` (default 0,
exact: both replay the same planned actions), else ``no ratio ...: not the same work (...)``.
``ScienceWorldEnv.step`` takes only ``--wrapper-steps`` steps, so its ratio is taken against our
in-process mode's first as many steps (``agentgym_in_process_first_N``: the same tasks and actions,
the pair's step times kept one by one), not against all ``--steps``.

``--expert`` plays the expert on 40 tasks: 5 per category, the five test categories drawn from the
test split and the three train-only ones from the train split, seeded; success is a final score of
100 (``--expert-split test``: the whole split instead). A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time

import httpx

import agentgym
from agentgym.server.background import serve_in_process
from agentgym.testing import run_expert
from bench.common.equal_work import differences
from bench.common.findings import Findings
from bench.common.procs import children, rss_mb


def speed_tasks(spec: agentgym.EnvSpec, env) -> list[tuple[int, str, int, list[str]]]:
    """(task id, name, variation, expert actions up to the episode's end) of every 10th test task:
    all five test categories."""
    out = []
    for task_id in spec.splits["test"].task_ids[::10]:
        actions, _, _ = run_expert(spec, env, task_id, 200)
        out.append((task_id, env.task_name, env.variation, actions))
    return out


class Meter:
    def __init__(self) -> None:
        self.steps, self.step_s, self.resets, self.reset_s, self.errors = 0, 0.0, 0, 0.0, 0
        self.log: list[tuple[int, float]] = []  # (resets so far, seconds) of each step, if kept

    def result(self, **extra: object) -> dict:
        return {
            "steps": self.steps,
            "resets": self.resets,
            "errors": self.errors,
            "steps_per_s": round(self.steps / self.step_s, 1) if self.step_s else None,
            "ms_per_step": round(1000 * self.step_s / max(1, self.steps), 2),
            "ms_per_reset": round(1000 * self.reset_s / max(1, self.resets), 1),
            **extra,
        }

    def first(self, n: int) -> dict:
        """The result of the first ``n`` steps alone (from ``log``)."""
        part = self.log[:n]
        seconds = sum(s for _, s in part)
        return {
            "steps": len(part),
            "resets": part[-1][0] if part else 0,
            "errors": self.errors,
            "steps_per_s": round(len(part) / seconds, 1) if seconds else None,
            "ms_per_step": round(1000 * seconds / max(1, len(part)), 2),
        }


def run_ours(env, meter: Meter, task: tuple, budget: int) -> None:
    task_id, _, _, actions = task
    t0 = time.perf_counter()
    env.reset(options={"task_id": task_id})
    t1 = time.perf_counter()
    for action in actions[:budget]:
        env.step(action)
    t2 = time.perf_counter()
    meter.resets += 1
    meter.reset_s += t1 - t0
    meter.steps += min(budget, len(actions))
    meter.step_s += t2 - t1


def run_raw(raw, meter: Meter, task: tuple, budget: int) -> None:
    _, name, variation, actions = task
    api = raw.server  # the simulator's PythonInterface, through scienceworld's own gateway
    t0 = time.perf_counter()
    api.load(name, variation, "", False)
    api.step("look around")
    t1 = time.perf_counter()
    for action in actions[:budget]:
        api.step(action), api.getScore(), api.getCompleted()
    t2 = time.perf_counter()
    meter.resets += 1
    meter.reset_s += t1 - t0
    meter.steps += min(budget, len(actions))
    meter.step_s += t2 - t1


def raw_env(java_tool_options: str | None):
    """A ``scienceworld.ScienceWorldEnv``; its JVM gets ``java_tool_options`` if given."""
    from scienceworld import ScienceWorldEnv

    previous = os.environ.get("JAVA_TOOL_OPTIONS")
    if java_tool_options:
        os.environ["JAVA_TOOL_OPTIONS"] = java_tool_options
    try:
        return ScienceWorldEnv("", envStepLimit=10**9)
    finally:
        if previous is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = previous


def bench_pair(tasks: list[tuple], steps: int, deterministic: bool, wrapper_steps: int = 0) -> dict:
    """Our env and ``scienceworld`` called directly, on JVMs with the same flags, interleaved."""
    from agentgym_sciworld.simulator import DEFAULT_JAVA_OPTIONS, DETERMINISTIC_OPTIONS

    if deterministic:  # our defaults, given to scienceworld's JVM too
        ours = agentgym.make("sciworld")
        raw = raw_env(" ".join(DEFAULT_JAVA_OPTIONS + DETERMINISTIC_OPTIONS))
        names = ("agentgym_in_process", "raw_same_jvm_flags")
    else:  # scienceworld's JVM as it starts it, given to ours too
        ours = agentgym.make("sciworld", deterministic=False, java_options=())
        raw = raw_env(None)
        names = ("agentgym_in_process_nondeterministic", "raw_scienceworld_defaults")
    m_ours, m_raw = Meter(), Meter()
    # Warm both JVMs (class loading, JIT) on one pass over the tasks before timing.
    for task in tasks:
        run_ours(ours, Meter(), task, 10**9)
        run_raw(raw, Meter(), task, 10**9)
    api = raw.server
    i = 0
    while m_ours.steps < steps and i < len(tasks) * (steps + 1):  # (every task failing: stop)
        task_id, name, variation, actions = tasks[i % len(tasks)]
        i += 1
        ok = {"ours": True, "raw": True}
        t0 = time.perf_counter()
        try:
            ours.reset(options={"task_id": task_id})
            m_ours.resets += 1
        except Exception:  # noqa: BLE001 - counted; this side skips the task
            m_ours.errors, ok["ours"] = m_ours.errors + 1, False
        t1 = time.perf_counter()
        try:
            api.load(name, variation, "", False)
            api.step("look around")
            m_raw.resets += 1
        except Exception:  # noqa: BLE001
            m_raw.errors, ok["raw"] = m_raw.errors + 1, False
        t2 = time.perf_counter()
        m_ours.reset_s, m_raw.reset_s = m_ours.reset_s + t1 - t0, m_raw.reset_s + t2 - t1
        # Step by step, alternating which goes first: a burst of load from elsewhere hits both.
        for k, action in enumerate(actions[: steps - m_ours.steps]):
            for side in ("ours", "raw") if k % 2 == 0 else ("raw", "ours"):
                if not ok[side]:
                    continue
                meter = m_ours if side == "ours" else m_raw
                t = time.perf_counter()
                try:
                    if side == "ours":
                        ours.step(action)
                    else:
                        api.step(action), api.getScore(), api.getCompleted()
                except Exception:  # noqa: BLE001
                    meter.errors, ok[side] = meter.errors + 1, False
                    continue
                seconds = time.perf_counter() - t
                meter.step_s += seconds
                meter.steps += 1
                meter.log.append((meter.resets, seconds))
            if not ok["ours"]:
                break
    out = {
        names[0]: m_ours.result(jvm_rss_mb=rss_mb(ours.jvm_pid), python_process_rss_mb=rss_mb(os.getpid())),
        names[1]: m_raw.result(jvm_rss_mb=rss_mb(raw._gateway.java_process.pid)),
    }
    if deterministic and wrapper_steps:  # the same steps as bench_wrapper's, for its ratio
        out[f"agentgym_in_process_first_{wrapper_steps}"] = m_ours.first(wrapper_steps)
    ours.close()
    raw.close()
    return out


def bench_wrapper(tasks: list[tuple], steps: int) -> dict:
    """``ScienceWorldEnv.step`` as its README uses it."""
    raw = raw_env(None)
    wrapped, i = Meter(), 0
    while wrapped.steps < steps and i < len(tasks) * (steps + 1):
        _, name, variation, actions = tasks[i % len(tasks)]
        i += 1
        t0 = time.perf_counter()
        try:
            raw.load(name, variation)
            raw.reset()
        except Exception:  # noqa: BLE001 - counted; the next task
            wrapped.errors += 1
            continue
        t1 = time.perf_counter()
        wrapped.resets += 1
        wrapped.reset_s += t1 - t0
        budget = steps - wrapped.steps
        for action in actions[:budget]:
            try:
                raw.step(action)
            except Exception:  # noqa: BLE001
                wrapped.errors += 1
                break
            wrapped.steps += 1
        wrapped.step_s += time.perf_counter() - t1
    out = {"scienceworld_env_step": wrapped.result(jvm_rss_mb=rss_mb(raw._gateway.java_process.pid))}
    raw.close()
    return out


def bench_served(tasks: list[tuple], steps: int, workers: int) -> dict:
    with serve_in_process(["sciworld"], "--workers", str(workers)) as served:
        url, server = served.url, served.proc
        meters = [Meter() for _ in range(workers)]

        def session(k: int) -> None:
            client = httpx.Client(base_url=url, timeout=300)
            sid = client.post("/v1/sessions", json={"env": "sciworld"}).json()["session_id"]
            for task in tasks:  # warm-up pass, as in-process
                client.post(f"/v1/sessions/{sid}/reset", json={"task_id": task[0]})
                for action in task[3]:
                    r = client.post(f"/v1/sessions/{sid}/step", json={"action": action})
                    if r.json().get("terminated"):
                        break
            meter, i = meters[k], k
            while meter.steps < steps and i < k + len(tasks) * (steps + 1):
                task_id, _, _, actions = tasks[i % len(tasks)]
                i += 1
                t0 = time.perf_counter()
                r = client.post(f"/v1/sessions/{sid}/reset", json={"task_id": task_id})
                t1 = time.perf_counter()
                if r.is_error:
                    meter.errors += 1
                    continue
                meter.resets += 1
                meter.reset_s += t1 - t0
                budget = steps - meter.steps
                for action in actions[:budget]:
                    r = client.post(f"/v1/sessions/{sid}/step", json={"action": action})
                    if r.is_error:
                        meter.errors += 1
                        break
                    meter.steps += 1
                meter.step_s += time.perf_counter() - t1

        t0 = time.perf_counter()
        threads = [threading.Thread(target=session, args=(k,)) for k in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        jvms = {w: children(w) for w in children(server.pid)}
        jvms = {w: js for w, js in jvms.items() if js}  # not multiprocessing's resource tracker
        per_session = [m.result() for m in meters]
        return {
            f"served_workers_{workers}": {
                "sessions": workers,
                "per_session": per_session,
                "aggregate_steps_per_s": round(sum(m.steps / m.step_s for m in meters), 1),
                "wall_s_including_warmup": round(wall, 1),
                "jvm_rss_mb": [rss_mb(j) for js in jvms.values() for j in js],
                "worker_process_rss_mb": [rss_mb(w) for w in jvms],
                "server_process_rss_mb": rss_mb(server.pid),
            }
        }


def expert_sample(spec: agentgym.EnvSpec) -> list[int]:
    """40 tasks: 5 per category (test categories from the test split, the others from train)."""
    from agentgym_sciworld.tasks import CATEGORIES

    ids = []
    for category in CATEGORIES:
        split = spec.splits["test" if category in spec.splits["test"].categories else "train"]
        pool = list(split.categories[category])
        ids.extend(sorted(random.Random(f"sciworld/expert/{category}").sample(pool, 5)))
    return ids


def bench_expert(spec: agentgym.EnvSpec, max_turns: int, ids: list[int]) -> dict:
    env = agentgym.make("sciworld")
    rows, t0 = [], time.perf_counter()
    for task_id in ids:
        t = time.perf_counter()
        actions, records, success = run_expert(spec, env, task_id, max_turns)
        raw = records[-1][4]["raw_score"] if records else None
        rows.append(
            {
                "task_id": task_id,
                "category": env.category,
                "task": f"{env.task_name} {env.variation}",
                "score_100": bool(success and raw == 100),
                "raw_score": raw,
                "turns": len(actions),
                "return": round(sum(r[1] for r in records), 4),
                "s": round(time.perf_counter() - t, 1),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    env.close()
    by_category: dict[str, list[int]] = {}
    for row in rows:
        by_category.setdefault(row["category"], [0, 0])
        by_category[row["category"]][0] += row["score_100"]
        by_category[row["category"]][1] += 1
    wins = sum(r["score_100"] for r in rows)
    return {
        "expert": {
            "tasks": len(rows),
            "score_100": wins,
            "rate": round(wins / len(rows), 4),
            "by_category": {c: f"{w}/{n}" for c, (w, n) in by_category.items()},
            "mean_turns": round(sum(r["turns"] for r in rows) / len(rows), 1),
            "max_turns_used": max(r["turns"] for r in rows),
            "failures": [r for r in rows if not r["score_100"]],
            "seconds": round(time.perf_counter() - t0, 1),
        }
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=500, help="steps per mode (default: 500)")
    ap.add_argument("--workers", type=int, default=2, help="server workers and sessions (default: 2)")
    ap.add_argument(
        "--wrapper-steps",
        type=int,
        default=50,
        help="steps through ScienceWorldEnv.step (default: 50; 0 skips)",
    )
    ap.add_argument("--expert", action="store_true", help="also play the expert on the 40-task sample")
    ap.add_argument("--expert-turns", type=int, default=200, help="turn cap for the expert (default: 200)")
    ap.add_argument(
        "--expert-split",
        default=None,
        help="play the expert on this whole split instead of the 40-task sample",
    )
    ap.add_argument("--skip-speed", action="store_true", help="only the expert sample")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="relative difference allowed between two modes' resets and steps before their ratio is "
        "withheld (default: 0, exact: the same planned actions)",
    )
    args = ap.parse_args(argv)

    spec = agentgym.env_specs()["sciworld"]
    out: dict = {}
    if not args.skip_speed:
        probe = agentgym.make("sciworld")
        tasks = speed_tasks(spec, probe)
        probe.close()
        out["tasks"] = [f"{name} {variation}" for _, name, variation, _ in tasks]
        out.update(bench_pair(tasks, args.steps, deterministic=True, wrapper_steps=args.wrapper_steps))
        out.update(bench_pair(tasks, args.steps, deterministic=False))
        if args.wrapper_steps:
            out.update(bench_wrapper(tasks, args.wrapper_steps))
        out.update(bench_served(tasks, args.steps, args.workers))
    if args.expert or args.expert_split:
        ids = list(spec.splits[args.expert_split].task_ids) if args.expert_split else expert_sample(spec)
        out.update(bench_expert(spec, args.expert_turns, ids))
    pairs = []
    if not args.skip_speed:
        pairs = [
            ("agentgym_in_process/raw_same_jvm_flags", "agentgym_in_process", "raw_same_jvm_flags"),
            (
                "agentgym_in_process_nondeterministic/raw_scienceworld_defaults",
                "agentgym_in_process_nondeterministic",
                "raw_scienceworld_defaults",
            ),
            (
                "agentgym_in_process/raw_scienceworld_defaults (determinism's cost, not interleaved)",
                "agentgym_in_process",
                "raw_scienceworld_defaults",
            ),
        ]
        if "scienceworld_env_step" in out:
            first = f"agentgym_in_process_first_{args.wrapper_steps}"
            pairs.append(("agentgym_in_process/scienceworld_env_step", first, "scienceworld_env_step"))
        out["tolerance"] = args.tolerance
        out["not_equal"] = {}
        for label, a, b in pairs:
            why = differences(out[a], out[b], args.tolerance, names=(a, b), keys=("resets", "steps"))
            if why:
                out["not_equal"][label] = why
    findings = Findings()
    findings.show(out)
    for label, a, b in pairs:
        findings.ratio(label, out[a]["steps_per_s"], out[b]["steps_per_s"], out["not_equal"].get(label, []))


if __name__ == "__main__":
    main()
