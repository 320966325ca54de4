"""Benchmark: the webarena env on the bundled sites in headless Chromium.

    python -m bench.speed.webarena [--duration 10] [--sessions 1,16] [--split test] [--baseline CHECKOUT]

For each session count N: N env instances (browser contexts of one browser, each with its own
database copy) play the expert on the bundled tasks in N threads for ``--duration`` seconds.
Reported per N: step latency p50/p99 (an action plus the next observation: the accessibility tree
over CDP), reset latency p50/p99, steps/s over all sessions, and memory (PSS and RSS): this process
plus every process it started (Playwright's driver, Chromium and its renderers), after the run; and
CPU: the cores that tree used and its CPU-ms per step (resets included), beside the machine's load
average (a shared machine's other work takes cores too), and the same CPU-ms per step by kind of
process (``cpu_ms_per_step_by_process``: python, playwright driver, chromium browser, renderer,
gpu, zygote, utility: network...; ``unattributed``: what processes used after their last sample,
4 a second, before they exited). Then
sessions created per second: a new env, its reset (context, database copy, start page) and its
close, one after another. Then two figures with a budget each (the budgets the env's tests once
asserted; a test on a shared machine is no place for a timing): ``session_db_copy_ms``, the mean
time to give a session its copy of the pristine database (``Databases.open``, 20 copies; budget
20 ms), and ``no_navigation_wait_ms``, how long an action that starts no navigation waits for one
(``Navigations.follow`` with nothing started, 20 times: p50 and max; it should be the request
window, 50 ms; budget: the window plus 1 s). Prints one JSON object, then ratio lines against the
1-session run, a line of CPU-ms per step by process for each run, the CPU ceiling (cores / CPU per step: what no number of sessions can pass), and
each budgeted figure over its budget (``ratio NAME/budget``: over 1 is over budget). A
benchmark, not a test: it asserts nothing.

With ``--baseline CHECKOUT`` (an earlier commit checked out, e.g. ``git worktree add /tmp/base
SHA``) the same benchmark runs on both, each in its own process, alternating for ``--rounds``
rounds; it prints the median figures of each and the ratios this/baseline, so a change is judged
in one run on one machine state.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import agentgym
from bench.common.findings import Findings
from bench.common.procs import children, tree_cpu_s


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def tree_memory_mb(pid: int | None = None) -> dict[str, float]:
    """Memory of a process and all its descendants, in MB: ``pss`` (proportional: a page shared by
    k processes counts 1/k in each, so the sum is what the tree really holds; Chromium's processes
    share most of theirs) and ``rss`` (every resident page of every process, shared ones counted
    again in each)."""
    pid = pid or os.getpid()
    totals = {"pss": 0, "rss": 0}
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    totals["pss"] += int(line.split()[1])
                elif line.startswith("Rss:"):
                    totals["rss"] += int(line.split()[1])
        except OSError:
            continue
        stack += children(p)
    return {k: round(v / 1024, 1) for k, v in totals.items()}


def process_kind(pid: int) -> str:
    """What a process of the tree is: ``python`` (this one), ``playwright driver``, ``chromium
    browser`` (the main process), ``chromium renderer``/``gpu``/``zygote``, ``chromium utility:
    SUBTYPE`` (network, storage, audio...), else its program's name."""
    if pid == os.getpid():
        return "python"
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return "gone"
    # Chromium's child processes rewrite their title: one string, arguments apart by spaces
    argv = raw.rstrip("\0").split("\0") if raw.count("\0") > 1 else raw.rstrip("\0").split(" ")
    program = os.path.basename(argv[0]) if argv and argv[0] else "?"
    if "run-driver" in argv or any("playwright" in a and a.endswith("cli.js") for a in argv):
        return "playwright driver"
    if "chrom" not in program and not any(a.startswith("--type=") for a in argv):
        return program
    if "crashpad" in program:
        return "chromium crashpad"
    kind = next((a.split("=", 1)[1] for a in argv if a.startswith("--type=")), None)
    if kind is None:
        return "chromium browser"
    if kind == "utility":
        sub = next((a.split("=", 1)[1] for a in argv if a.startswith("--utility-sub-type=")), "")
        return f"chromium utility: {sub.split('.')[0] or '?'}"
    return "chromium " + {"gpu-process": "gpu"}.get(kind, kind)


def _own_cpu_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime stime, not the reaped children's


class ProcessCpu:
    """CPU of each process of this tree by kind (``process_kind``) over a run: a thread samples
    every ``interval`` seconds each process's own CPU (a process that exits keeps its last
    sample; what it used after that is the ``unattributed`` rest of the tree's total). The
    sampler's own CPU is measured and taken off ``python``'s."""

    def __init__(self, interval: float = 0.25):
        self.interval = interval
        self._start: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.sampler_s = 0.0

    def _sample(self) -> None:
        stack = [os.getpid()]
        while stack:
            pid = stack.pop()
            ticks = _own_cpu_ticks(pid)
            if ticks is None:
                continue
            if pid not in self._kind:
                self._kind[pid] = process_kind(pid)
            self._last[pid] = ticks
            stack += children(pid)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()
        self._sample()
        self.sampler_s = time.thread_time()

    def start(self) -> ProcessCpu:
        self._sample()
        self._start = dict(self._last)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """CPU seconds by kind since ``start`` (born meanwhile: all their CPU)."""
        self._stop.set()
        self._thread.join()
        tick = os.sysconf("SC_CLK_TCK")
        by_kind: dict[str, float] = {}
        for pid, last in self._last.items():
            kind = self._kind[pid]
            by_kind[kind] = by_kind.get(kind, 0.0) + (last - self._start.get(pid, 0)) / tick
        by_kind["python"] = by_kind.get("python", 0.0) - self.sampler_s
        return by_kind


def run_sessions(n: int, duration: float, task_ids: list[int]) -> dict:
    spec = agentgym.env_specs()["webarena"]
    envs = [spec.make() for _ in range(n)]
    steps: list[float] = []
    resets: list[float] = []
    solved = [0]
    errors = [0]  # sessions whose env raised: their thread stops, and the run gets no ratio
    lock = threading.Lock()

    def play(k: int) -> None:
        try:
            _play(k)
        except Exception:  # noqa: BLE001 - counted and reported, never a silently thinner run
            with lock:
                errors[0] += 1

    def _play(k: int) -> None:
        env = envs[k]
        expert = spec.make_expert(env)
        i = k
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            obs, info = env.reset(options={"task_id": task_ids[i % len(task_ids)]})
            mine_reset, mine_steps = [time.perf_counter() - t0], []
            for _ in range(20):
                t0 = time.perf_counter()
                obs, _, terminated, truncated, info = env.step(expert(obs, info))
                mine_steps.append(time.perf_counter() - t0)
                if terminated or truncated:
                    break
            with lock:
                resets.extend(mine_reset)
                steps.extend(mine_steps)
                solved[0] += bool(info.get("success"))
            i += n

    for env in envs:  # warm up: the browser, the sites and a context per session
        env.reset(options={"task_id": task_ids[0]})
    processes = ProcessCpu().start()
    cpu0, t0 = tree_cpu_s(), time.perf_counter()
    stop_at = t0 + duration  # after the warm-up: a browser's start is not the sessions' time
    threads = [threading.Thread(target=play, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    by_kind = processes.stop()
    cpu = tree_cpu_s() - cpu0 - processes.sampler_s
    by_kind["unattributed"] = cpu - sum(by_kind.values())
    per_step = {
        k: round(1000 * v / max(1, len(steps)), 1) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])
    }
    memory = tree_memory_mb()
    for env in envs:
        env.close()
    return {
        "sessions": n,
        "step_p50_ms": round(1000 * percentile(steps, 0.5), 1),
        "step_p99_ms": round(1000 * percentile(steps, 0.99), 1),
        "reset_p50_ms": round(1000 * percentile(resets, 0.5), 1),
        "reset_p99_ms": round(1000 * percentile(resets, 0.99), 1),
        "steps": len(steps),
        "steps_per_s": round(len(steps) / elapsed, 1),
        "episodes": len(resets),
        "expert_success": round(solved[0] / max(1, len(resets)), 3),
        "errors": errors[0],
        # this process and the ones it started, resets included: with C cores, steps/s over all
        # sessions cannot pass C / cpu_per_step, however many sessions run
        "cpu_cores": round(cpu / elapsed, 2),
        "cpu_ms_per_step": round(1000 * cpu / max(1, len(steps)), 1),
        # the same by kind of process (the sampler's own CPU taken off python's and the total)
        "cpu_ms_per_step_by_process": per_step,
        "loadavg_1min": round(os.getloadavg()[0], 2),  # the machine's, others' work included
        "pss_mb": memory["pss"],
        "rss_mb": memory["rss"],
    }


def session_rate(duration: float, task_id: int) -> dict:
    spec = agentgym.env_specs()["webarena"]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < duration:
        env = spec.make()
        env.reset(options={"task_id": task_id})
        env.close()
        n += 1
    elapsed = time.perf_counter() - t0
    return {"sessions": n, "seconds": round(elapsed, 2), "sessions_per_s": round(n / elapsed, 2)}


#: budgets of the figures below, in ms (the bounds the env's tests asserted before they moved here)
DB_COPY_BUDGET_MS = 20.0
NO_NAVIGATION_OVER_WINDOW_MS = 1000.0


def db_copy_ms(copies: int = 20) -> float:
    """Mean ms to give a session its own copy of the pristine database (``Databases.open``)."""
    from agentgym_webarena.sites.db import Databases

    with tempfile.TemporaryDirectory() as directory:
        dbs = Databases(directory)
        t0 = time.perf_counter()
        for i in range(copies):
            dbs.open(f"t{i}")
        elapsed = time.perf_counter() - t0
        dbs.close()
    return round(1000 * elapsed / copies, 2)


def no_navigation_wait(repeats: int = 20) -> dict:
    """How long ``Navigations.follow`` waits when the action started no navigation (ms): it should
    return once the request window has passed."""
    from agentgym_webarena.navigation import REQUEST_WINDOW, Navigations

    async def waits() -> list[float]:
        loop, nav, out = asyncio.get_running_loop(), Navigations(), []
        for _ in range(repeats):
            t0 = loop.time()
            await nav.follow(nav.marks())
            out.append(loop.time() - t0)
        return out

    values = asyncio.run(waits())
    return {
        "window_ms": 1000 * REQUEST_WINDOW,
        "p50_ms": round(1000 * percentile(values, 0.5), 1),
        "max_ms": round(1000 * max(values), 1),
    }


def _measure(args: argparse.Namespace, checkout: Path | None) -> dict:
    """One run of this benchmark in a fresh process, on ``checkout``'s packages (None: this tree's)."""
    env = dict(os.environ)
    if checkout is not None:
        sources = [str(checkout / "packages" / p / "src") for p in ("agentgym-core", "agentgym-env-webarena")]
        env["PYTHONPATH"] = os.pathsep.join([*sources, env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", __spec__.name, "--json", "--duration", str(args.duration)]
    command += ["--sessions", args.sessions, "--split", args.split]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def compare(args: argparse.Namespace) -> None:
    """This tree against ``args.baseline``, alternating, and the ratios of their medians."""
    results: dict[str, list[dict]] = {"baseline": [], "this": []}
    for _ in range(args.rounds):
        results["baseline"].append(_measure(args, args.baseline))
        results["this"].append(_measure(args, None))
    keys = ("steps_per_s", "step_p50_ms", "reset_p50_ms", "expert_success", "pss_mb", "cpu_ms_per_step")
    medians = {
        label: [
            {
                "sessions": run["sessions"],
                **{k: statistics.median(r["runs"][i][k] for r in rounds) for k in keys},
            }
            for i, run in enumerate(rounds[0]["runs"])
        ]
        for label, rounds in results.items()
    }
    findings = Findings()
    findings.show({"rounds": args.rounds, "baseline": str(args.baseline), "medians": medians}, indent=1)
    for base, this in zip(medians["baseline"], medians["this"], strict=True):
        for k in keys:
            findings.ratio(f"{k} this/baseline @{this['sessions']} sessions", this[k], base[k], [])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per session count")
    parser.add_argument("--sessions", default="1,16", help="session counts, comma-separated")
    parser.add_argument("--split", default="test")
    parser.add_argument(
        "--baseline", type=Path, help="a checkout of an earlier commit to compare against, same run"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds with --baseline")
    parser.add_argument("--json", action="store_true", help="print the JSON object only")
    args = parser.parse_args()
    if args.baseline is not None:
        compare(args)
        return
    spec = agentgym.env_specs()["webarena"]
    task_ids = list(spec.splits[args.split].task_ids)
    before = tree_memory_mb()
    runs = [run_sessions(int(n), args.duration, task_ids) for n in args.sessions.split(",")]
    rate = session_rate(min(args.duration, 5.0), task_ids[0])
    out = {"memory_before_mb": before, "runs": runs, "session_creation": rate}
    out["session_db_copy_ms"] = db_copy_ms()
    out["no_navigation_wait_ms"] = no_navigation_wait()
    findings = Findings()
    findings.show(out, indent=1)
    if args.json:
        return
    wait = out["no_navigation_wait_ms"]
    budgets = {
        "session_db_copy_ms": (out["session_db_copy_ms"], DB_COPY_BUDGET_MS),
        "no_navigation_wait_ms.max": (wait["max_ms"], wait["window_ms"] + NO_NAVIGATION_OVER_WINDOW_MS),
    }
    for name, (value, budget) in budgets.items():
        print(f"{name}: {value} ms, budget {budget:g} ms: {'within' if value <= budget else 'OVER'}")
        findings.value(f"{name}/budget", value / budget)
    for run in runs:
        parts = ", ".join(f"{k} {v}" for k, v in run["cpu_ms_per_step_by_process"].items())
        print(f"CPU-ms per step @{run['sessions']} sessions: {run['cpu_ms_per_step']} = {parts}")
    first, last = runs[0], runs[-1]
    ceiling = (os.cpu_count() or 1) * 1000 / first["cpu_ms_per_step"]
    print(
        f"CPU ceiling on {os.cpu_count()} cores at {first['cpu_ms_per_step']} CPU-ms per step: "
        f"{ceiling:.1f} steps/s, {ceiling / first['steps_per_s']:.2f}x one session's"
    )
    # the same work: the expert on the same tasks, so the same success, and no session lost
    why = [f"{r['sessions']} sessions had {r['errors']} error(s)" for r in (first, last) if r["errors"]]
    if abs(first["expert_success"] - last["expert_success"]) > 0.10:
        why.append(f"expert success {first['expert_success']} vs {last['expert_success']}")
    pair = f"{last['sessions']}/{first['sessions']} sessions"
    findings.ratio(f"step_p50 {pair}", last["step_p50_ms"], first["step_p50_ms"], why)
    findings.ratio(f"steps_per_s {pair}", last["steps_per_s"], first["steps_per_s"], why)
    findings.ratio(f"pss {pair}", last["pss_mb"], first["pss_mb"], why)
    extra = (last["pss_mb"] - first["pss_mb"]) / max(1, last["sessions"] - first["sessions"])
    print(f"pss per extra session: {extra:.1f} MB")


if __name__ == "__main__":
    main()
