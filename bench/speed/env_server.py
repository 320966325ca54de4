"""Benchmark: env steps/s in-process vs over HTTP (one step per request, and batched).

    python -m bench.speed.env_server [--env guess] [--workers 1] [--duration 3] [--sessions 1,16,64]
    python -m bench.speed.env_server --env babyai --split train --workers 2     # mixed BabyAI levels
    python -m bench.speed.env_server --env babyai --group 8       # also GRPO-shaped resets, 8 per task

Replays expert trajectories (computed in-process first) so that every mode does the same env work.
Prints one JSON object, then ``ratio batched_http/in_process@N: X``: batched HTTP at the largest
session count N over the same N sessions stepped in-process in lockstep, one thread (the same steps
and resets in the same order: short episodes reset more often when sessions step in lockstep, so a
one-env loop does less env work per step); ``overhead_us_per_step batched_http@N: Y``, what HTTP adds
per step (1/http − 1/in-process steps/s, in µs, whatever the env's own speed); ``ratio ceiling
batched_http/in_process@N: C``, the most that ratio can be while the server's CPU per step stays as
measured (with one worker, one process steps every item, so a round takes at least its CPU time
however much of the client's work overlaps it); and
``ratio batched_http/in_process: X``, against one env stepping one episode after another (the
figure reported before the lockstep baseline). A benchmark, not a test: it asserts nothing.
Both sides replay the same expert trajectories, so a step is the same work on each; a step or
reset the server refuses is counted as an error, not a step, and a side with errors gets
``no ratio ...`` instead of a number (``bench/common/equal_work.py``).

The plain modes run with the reset cache off (``agentgym.resets``: every reset generates its task,
as in a pass over distinct tasks). ``--group N`` adds the same modes with GRPO-shaped resets: each
trajectory played N times in a row (one env: back to back; N sessions: at once), with the cache on
and holding only the tasks in flight, so that no task is found saved from an earlier pass:
``in_process_grpo``, ``in_process_lockstep_grpo``, ``http_batched_grpo`` and
``ratio in_process_grpo/in_process`` (what the cache gives one env), ``ratio
batched_http_grpo/in_process_grpo@N``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time

import httpx

import agentgym
import agentgym.env
from agentgym.client import AsyncEnvPool
from agentgym.resets import ResetCache
from agentgym.server.background import serve_in_process
from agentgym.testing.conformance import run_expert
from bench.common.findings import Findings
from bench.common.procs import tree_cpu_s


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def trajectories(env_name: str, n: int, split_name: str = "test") -> list[tuple[int, list[str]]]:
    spec = agentgym.env_specs()[env_name]
    if split_name not in spec.splits:
        raise SystemExit(f"{env_name} has no split {split_name!r} (has: {', '.join(spec.splits)})")
    split = spec.splits[split_name]
    ids = list(split.task_ids[:n])
    env = spec.make()
    out = []
    for task_id in ids:
        actions, _, _ = run_expert(spec, env, task_id, spec.default_max_turns)
        out.append((task_id, actions))
    return out


def bench_in_process(env_name: str, trajs, duration: float) -> dict:
    env = agentgym.make(env_name)
    steps = resets = 0
    reset_time = step_time = 0.0
    t_end = time.perf_counter() + duration
    i = 0
    while time.perf_counter() < t_end:
        task_id, actions = trajs[i % len(trajs)]
        i += 1
        t0 = time.perf_counter()
        env.reset(options={"task_id": task_id})
        t1 = time.perf_counter()
        for a in actions:
            env.step(a)
        t2 = time.perf_counter()
        reset_time += t1 - t0
        step_time += t2 - t1
        steps += len(actions)
        resets += 1
    total = reset_time + step_time
    return {
        "steps_per_s": steps / total,  # resets included, as in the HTTP modes
        "pure_steps_per_s": steps / step_time,
        "resets_per_s": resets / reset_time,
        "steps": steps,
    }


def bench_in_process_lockstep(env_name: str, trajs, sessions: int, duration: float) -> dict:
    """``sessions`` env instances stepped in lockstep in one thread, on the schedule of
    ``bench_http_batched``: one step of each session per round, then a reset of each finished one."""
    envs = [agentgym.make(env_name) for _ in range(sessions)]
    state = []  # [env, trajectory index, position]
    for k, env in enumerate(envs):
        env.reset(options={"task_id": trajs[k % len(trajs)][0]})
        state.append([env, k % len(trajs), 0])
    steps = 0
    t0 = time.perf_counter()
    t_end = t0 + duration
    while time.perf_counter() < t_end:
        for s in state:
            s[0].step(trajs[s[1]][1][s[2]])
        steps += len(state)
        for s in state:
            s[2] += 1
            if s[2] >= len(trajs[s[1]][1]):
                s[1], s[2] = (s[1] + sessions) % len(trajs), 0
                s[0].reset(options={"task_id": trajs[s[1]][0]})
    elapsed = time.perf_counter() - t0
    for env in envs:
        env.close()
    return {"steps_per_s": steps / elapsed, "steps": steps}


def bench_http_single(url: str, env_name: str, trajs, concurrency: int, duration: float) -> dict:
    """``concurrency`` sessions, each stepped by a thread of its own, one step per request. The
    clock runs from when every session exists (as in ``bench_http_batched`` and the in-process
    baselines, whose envs are made and reset before their clocks start) to the stop; steps taken
    after the stop are not counted."""
    latencies: list[float] = []
    counts = [0] * concurrency
    errors = [0] * concurrency  # refused steps and resets: not counted as steps, and no ratio
    lock = threading.Lock()
    barrier = threading.Barrier(concurrency + 1)
    stop = threading.Event()

    def worker(k: int) -> None:
        lat: list[float] = []
        with httpx.Client(base_url=url, timeout=60) as c:
            task_id, actions = trajs[k % len(trajs)]
            sid = c.post("/v1/sessions", json={"env": env_name, "task_id": task_id}).json()["session_id"]
            barrier.wait()
            j = k
            while not stop.is_set():
                for a in actions:
                    t0 = time.perf_counter()
                    ok = c.post(f"/v1/sessions/{sid}/step", json={"action": a}).is_success
                    lat.append(time.perf_counter() - t0)
                    counts[k] += ok
                    errors[k] += not ok
                j += concurrency
                task_id, actions = trajs[j % len(trajs)]
                errors[k] += not c.post(f"/v1/sessions/{sid}/reset", json={"task_id": task_id}).is_success
            c.delete(f"/v1/sessions/{sid}")
        with lock:
            latencies.extend(lat)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    barrier.wait()  # every session created
    t0 = time.perf_counter()
    time.sleep(duration)
    stop.set()
    done = list(counts)
    elapsed = time.perf_counter() - t0
    for t in threads:
        t.join()
    return {
        "steps_per_s": sum(done) / elapsed,
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "steps": sum(done),
        "errors": sum(errors),
    }


def bench_http_batched(
    url: str,
    env_name: str,
    trajs,
    sessions: int,
    duration: float,
    groups: int = 1,
    server_pid: int | None = None,
) -> dict:
    """``sessions`` sessions stepped in batches through ``AsyncEnvPool`` (the client trainers use):
    a step whose trajectory ends asks for an autoreset to the session's next trajectory, so a
    lockstep round is one request. With ``groups`` > 1 the sessions are split into that many
    groups, each with its own client thread, so that one group's batch is in the server while
    another group's results are being read (as a rollout engine overlaps generation and env steps).
    ``client_us_per_step``: the client threads' CPU time per step (``time.thread_time``);
    ``server_cpu_us_per_step``: the server's (process ``server_pid`` and its workers, from ``/proc``)."""
    latencies: list[float] = []
    counts, errors = [0] * groups, [0] * groups  # errors: refused items and resets
    client_cpu = [0.0] * groups
    lock = threading.Lock()
    sizes = [sessions // groups + (g < sessions % groups) for g in range(groups)]
    offsets = [sum(sizes[:g]) for g in range(groups)]
    barrier = threading.Barrier(groups + 1)
    stop = threading.Event()

    async def run_group(g: int) -> None:
        lat: list[float] = []
        async with AsyncEnvPool(url, env_name, max_connections=4) as pool:
            ks = range(offsets[g], offsets[g] + sizes[g])
            opened = await pool.open([trajs[k % len(trajs)][0] for k in ks])
            state = [[s, k % len(trajs), 0] for s, k in zip(opened, ks, strict=True)]  # session, traj, pos
            barrier.wait()
            cpu0 = time.thread_time()
            while not stop.is_set():
                pairs = []
                for s in state:
                    actions = trajs[s[1]][1]
                    last = s[2] + 1 >= len(actions)
                    nxt = (s[1] + sessions) % len(trajs)
                    pairs.append((s[0], actions[s[2]], trajs[nxt][0]) if last else (s[0], actions[s[2]]))
                t0 = time.perf_counter()
                outcomes = await pool.step(pairs)
                lat.append(time.perf_counter() - t0)
                counts[g] += sum(o.error is None for o in outcomes)
                errors[g] += sum(o.error is not None for o in outcomes)
                unreset = []  # a trajectory that ended before its episode did: reset the usual way
                for s, o in zip(state, outcomes, strict=True):
                    s[2] += 1
                    if s[2] >= len(trajs[s[1]][1]):
                        s[1], s[2] = (s[1] + sessions) % len(trajs), 0
                        if o.reset is None or "error" in o.reset:
                            unreset.append(s)
                errors[g] += sum("error" in o.reset for o in outcomes if o.reset is not None)
                for s in unreset:
                    await pool.reset(s[0], trajs[s[1]][0])
            client_cpu[g] = time.thread_time() - cpu0
        with lock:
            latencies.extend(lat)

    threads = [threading.Thread(target=asyncio.run, args=(run_group(g),)) for g in range(groups)]
    for t in threads:
        t.start()
    barrier.wait()
    t_start = time.perf_counter()  # before the /proc read below: the clients step during it
    server_cpu0 = tree_cpu_s(server_pid) if server_pid else 0.0
    time.sleep(duration)
    stop.set()
    done = list(counts)
    elapsed = time.perf_counter() - t_start
    server_cpu = tree_cpu_s(server_pid) - server_cpu0 if server_pid else None
    for t in threads:
        t.join()
    out = {
        "steps_per_s": sum(done) / elapsed,
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "requests": len(latencies),
        "steps": sum(done),
        "errors": sum(errors),
        "client_us_per_step": 1e6 * sum(client_cpu) / max(1, sum(counts)),
    }
    if server_cpu is not None:
        out["server_cpu_us_per_step"] = 1e6 * server_cpu / max(1, sum(done))
    return out


def bench_grpo(args: argparse.Namespace, trajs, sessions: int) -> dict:
    """The in-process and batched-HTTP modes with GRPO-shaped resets (``args.group`` per task), the
    reset cache holding the tasks in flight only (one env: 1; ``sessions``: sessions / group)."""
    n = args.group
    grouped = [t for t in trajs for _ in range(n)]
    in_flight = max(1, sessions // n)
    agentgym.env.RESETS = ResetCache(size=1)
    out = {"in_process_grpo": bench_in_process(args.env, grouped, args.duration)}
    agentgym.env.RESETS = ResetCache(size=in_flight)
    out["in_process_lockstep_grpo"] = {
        str(sessions): bench_in_process_lockstep(args.env, grouped, sessions, args.duration)
    }
    agentgym.env.RESETS = ResetCache(size=0)
    cache = {**os.environ, "AGENTGYM_RESET_CACHE": str(in_flight)}
    with serve_in_process(
        [args.env], "--workers", str(args.workers), "--capacity", "4096", env=cache, timeout=120
    ) as served:
        out["http_batched_grpo"] = {
            str(sessions): bench_http_batched(served.url, args.env, grouped, sessions, args.duration)
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="guess", help="installed env with an expert (default: guess)")
    ap.add_argument("--workers", type=int, default=1, help="server worker processes (default: 1)")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per measurement (default: 3)")
    ap.add_argument("--sessions", default="1,16,64", help="concurrent sessions to measure (default: 1,16,64)")
    ap.add_argument(
        "--trajectories", type=int, default=64, help="expert trajectories to replay (default: 64)"
    )
    ap.add_argument(
        "--split", default="test", help="split whose first ids give the trajectories (default: test)"
    )
    ap.add_argument(
        "--group",
        type=int,
        default=1,
        help="also measure GRPO-shaped resets: each task N times in a row, reset cache on (default: 1, off)",
    )
    ap.add_argument(
        "--groups",
        type=int,
        default=2,
        help="also measure batched HTTP with the sessions split into this many overlapping client "
        "groups (default: 2; 1 to skip)",
    )
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.sessions.split(",") if x.strip()]

    trajs = [t for t in trajectories(args.env, args.trajectories, args.split) if t[1]]
    top = max(counts)
    result: dict = {
        "env": args.env,
        "split": args.split,
        "workers": args.workers,
        "duration_s": args.duration,
    }
    no_cache = {**os.environ, "AGENTGYM_RESET_CACHE": "0"}
    agentgym.env.RESETS = ResetCache(size=0)
    result["in_process"] = bench_in_process(args.env, trajs, args.duration)
    result["in_process_lockstep"] = {str(top): bench_in_process_lockstep(args.env, trajs, top, args.duration)}
    with serve_in_process(
        [args.env], "--workers", str(args.workers), "--capacity", "4096", env=no_cache, timeout=120
    ) as served:
        url = served.url
        result["http_single"] = {
            str(n): bench_http_single(url, args.env, trajs, n, args.duration) for n in counts
        }
        pid = served.proc.pid if os.path.isdir("/proc") else None
        result["http_batched"] = {
            str(n): bench_http_batched(url, args.env, trajs, n, args.duration, server_pid=pid) for n in counts
        }
        if args.groups > 1:
            result["http_batched_overlapped"] = {
                str(n): bench_http_batched(url, args.env, trajs, n, args.duration, args.groups)
                for n in counts
            }
    if args.group > 1:
        result.update(bench_grpo(args, trajs, top))
    for section, value in result.items():
        if not isinstance(value, dict):
            continue
        for d in value.values() if not section.startswith("in_process") or "lockstep" in section else [value]:
            for k, v in d.items():
                if isinstance(v, float):
                    d[k] = round(v, 2)
    findings = Findings()
    findings.show(result)
    top = str(top)
    base, batched = result["in_process"]["steps_per_s"], result["http_batched"][top]["steps_per_s"]
    lockstep = result["in_process_lockstep"][top]["steps_per_s"]
    batched_errors = result["http_batched"][top].get("errors", 0)
    why = [f"batched HTTP had {batched_errors} error(s)"] if batched_errors else []
    findings.ratio(f"batched_http/in_process@{top}", batched, lockstep, why)
    if not why:
        print(f"overhead_us_per_step batched_http@{top}: {1e6 * (1 / batched - 1 / lockstep):.1f}")
    server_us = result["http_batched"][top].get("server_cpu_us_per_step")
    if server_us and args.workers == 1:  # one process steps every item: a step takes at least this
        findings.ratio(f"ceiling batched_http/in_process@{top}", 1e6 / server_us, lockstep, why)
    findings.ratio("batched_http/in_process", batched, base, why)
    single, single_errors = result["http_single"][top]["steps_per_s"], result["http_single"][top]["errors"]
    why_single = [f"single-step HTTP had {single_errors} error(s)"] if single_errors else []
    findings.ratio(f"single_http/in_process@{top}", single, lockstep, why_single)
    if "http_batched_overlapped" in result:
        overlapped = result["http_batched_overlapped"][top]
        why_o = [f"overlapped HTTP had {overlapped['errors']} error(s)"] if overlapped["errors"] else []
        label = f"batched_http_overlapped({args.groups} groups)/in_process@{top}"
        findings.ratio(label, overlapped["steps_per_s"], lockstep, why_o)
    if "in_process_grpo" in result:
        grpo = result["in_process_grpo"]["steps_per_s"]
        findings.ratio("in_process_grpo/in_process", grpo, base, [])
        batched_grpo = result["http_batched_grpo"][top]
        why_g = [f"GRPO batched HTTP had {batched_grpo['errors']} error(s)"] if batched_grpo["errors"] else []
        lockstep_grpo = result["in_process_lockstep_grpo"][top]["steps_per_s"]
        label = f"batched_http_grpo/in_process_grpo@{top}"
        findings.ratio(label, batched_grpo["steps_per_s"], lockstep_grpo, why_g)


if __name__ == "__main__":
    main()
