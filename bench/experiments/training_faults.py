"""Experiment: a training run through faults, beside the same run without them.

    python -m bench.experiments.training_faults [--minutes 32] [--every 55] [--out PATH]

Two ``agentgym serve babyai --workers 2 --step-timeout 5`` servers, each behind a proxy that can cut
its connections (``agentgym.testing.faults``), and ``agentgym train`` (native: the nano tiny model,
BabyAI, GRPO, a checkpoint every step) on the proxies. Every ``--every`` seconds the next fault in
turn, on the servers alternately:

- ``job_kill``: the trainer SIGKILLed and launched again with the same command (it resumes
  from its last checkpoint);
- ``worker_kill``: a server's worker SIGKILLed (the server restarts it; its sessions are lost);
- ``server_kill``: a whole server SIGKILLed, and started again on its port 2 s later;
- ``hang``: a worker SIGSTOPped, so its steps hang past ``--step-timeout`` (the server answers them
  at its silence limit and restarts the worker);
- ``drop``: every connection through a proxy reset, requests in flight included.

The run lasts ``--minutes``: then it is stopped (killed) and launched once more to end one step
after its last checkpoint (``steps`` may change on a resume). The same run without faults, the same
seeds, trains beside it on two servers of its own, and is ended at the same step the same way (a
resumed run equals a straight one). Reported: faults injected, sessions
restored by replay (the trainer's ``sessions_restored``), episodes lost (``termination="error"``,
left out of training), episodes trained twice (a step logged twice, or an episode twice in a
step's file; must be 0), steps completed, and every step's metrics beside the fault-free run's.
Writes ``--out`` (markdown) and the same figures as JSON beside it. An experiment: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentgym_train.models.tiny import build_tiny
from agentgym_train.rl.trainer import TIMING_KEYS
from agentgym_train.rollout.experts import expert_texts

from agentgym.testing.faults import DroppingProxy, FaultInjector, FaultyServer
from agentgym.trajectory import read_episodes, read_jsonl

STEP_TIMEOUT = 5.0
OPEN_ENDED = 1_000_000  # steps: the run is ended after --minutes
#: what differs between two runs that played the same episodes: time, memory, the fault counter
UNCOMPARED = {*TIMING_KEYS, "tokens_per_s", "peak_rss_gb", "peak_gpu_gb", "sessions_restored"}


def train_command(model: Path, runs: Path, name: str, steps: int, urls: list[str]) -> list[str]:
    return [sys.executable, "-m", "agentgym", "train", f"name={name}", f"runs_dir={runs}", f"model={model}",
            "envs=babyai", f"steps={steps}", "tasks_per_step=8", "n=2", "max_new_tokens=16", "lr=1e-3",
            "train_limit=200", "horizon=fixed", "horizon_params={horizon: 6}", "constrain_actions=true",
            "save_every=1",
            "val_before=false", "progress=false", *(f"--env-url={u}" for u in urls)]  # fmt: skip


def run_clean(command: list[str], log: Path) -> float:
    """The command to its end, no faults; its wall seconds."""
    t0 = time.monotonic()
    with open(log, "a") as out:
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=True)
    return time.monotonic() - t0


def audit(run: Path) -> dict[str, Any]:
    """What the run trained on: steps logged (twice?), episodes per step, lost and duplicated."""
    rows = [r for _, r in read_jsonl(run / "metrics.jsonl")]
    logged = collections.Counter(r["step"] for r in rows)
    lost = twice = episodes = 0
    for path in sorted((run / "episodes").glob("step_*.jsonl")):
        eps = list(read_episodes(path))
        keys = collections.Counter((e.group, e.sample) for e in eps)
        twice += sum(c - 1 for c in keys.values())
        lost += sum(e.termination == "error" for e in eps)
        episodes += len(eps)
    per_step = episodes // max(len(logged), 1)
    twice += sum(c - 1 for c in logged.values()) * per_step
    return {
        "steps_completed": len(logged),
        "episodes": episodes,
        "episodes_lost": lost,
        "episodes_trained_twice": twice,
        "sessions_restored": sum(int(r.get("sessions_restored", 0)) for r in rows),
        "rows": {r["step"]: r for r in rows},
    }


def compare(faulty: dict[int, dict], clean: dict[int, dict], steps: int) -> list[dict[str, Any]]:
    out = []
    for step in range(1, steps + 1):
        a, b = faulty.get(step, {}), clean.get(step, {})
        differ = sorted(k for k in b if k not in UNCOMPARED and a.get(k) != b[k])
        out.append({"step": step, "faulty": a, "clean": b, "differ": differ})
    return out


def served(log: Path) -> FaultyServer:
    return FaultyServer(["babyai"], step_timeout=STEP_TIMEOUT, log_path=log)


def last_checkpoint(run: Path) -> int:
    found = sorted(run.glob("checkpoints/step_*/state.pt"))
    return int(found[-1].parent.name.split("_")[1]) if found else 0


def report(args: argparse.Namespace, figures: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    f = figures
    same = sum(not r["differ"] for r in rows)
    lines = [
        "# Training through faults (tiny model, BabyAI, two env servers of 2 workers each)",
        "",
        f"`{f['command']}`, one run on this machine: `agentgym train` (native, nano tiny model, GRPO, 8 "
        "tasks x 2 samples a step, 6 turns, `constrain_actions` so that the untrained model's "
        "replies are actions the env steps, a checkpoint every step) on two `agentgym serve babyai "
        f"--workers 2 --step-timeout {STEP_TIMEOUT:g}` servers behind connection-cutting proxies, a fault "
        f"every {args.every:g} s in turn (each right after a step request went to its server); beside it, "
        "the same run without faults, the same seeds, on two servers of its own.",
        "",
        "| | fault run | fault-free run |",
        "|---|---|---|",
        f"| wall minutes | {f['faulty_wall_s'] / 60:.1f} | (beside it) |",
        f"| faults injected | {f['faults']} ({', '.join(f'{k} {v}' for k, v in f['by_kind'].items())}) | 0 |",
        f"| trainer deaths not injected | {f['trainer_died']} | 0 |",
        f"| steps completed | {f['faulty']['steps_completed']} of {f['steps']} | {f['clean']['steps_completed']} |",
        f"| sessions restored by replay | {f['faulty']['sessions_restored']} | {f['clean']['sessions_restored']} |",
        f"| episodes lost (error, left out of training) | {f['faulty']['episodes_lost']} of "
        f"{f['faulty']['episodes']} | {f['clean']['episodes_lost']} of {f['clean']['episodes']} |",
        f"| episodes trained twice | {f['faulty']['episodes_trained_twice']} | "
        f"{f['clean']['episodes_trained_twice']} |",
        f"| steps whose metrics equal the fault-free run's | {same} of {len(rows)} | |",
        "",
        "Steps where a fault cost something (a session restored, an episode lost) or the metrics "
        "differ, and every 50th (`=` where every metric but time, memory and `sessions_restored` "
        "equals the fault-free run's; all steps in the JSON beside this file):",
        "",
        "| step | return | success | env_errors | restored | pg_loss | fault-free return | success | pg_loss | equal |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["faulty"], r["clean"]
        if not (r["differ"] or a.get("env_errors") or a.get("sessions_restored") or r["step"] % 50 == 0):
            continue
        lines.append(
            f"| {r['step']} | {a.get('return', float('nan')):.3f} | {a.get('success', float('nan')):.2f} | "
            f"{a.get('env_errors', '')} | {a.get('sessions_restored', '')} | {a.get('pg_loss', float('nan')):.4f} | "
            f"{b.get('return', float('nan')):.3f} | {b.get('success', float('nan')):.2f} | {b.get('pg_loss', float('nan')):.4f} | "
            f"{'=' if not r['differ'] else 'differs: ' + ', '.join(r['differ'][:4])} |"
        )
    lines += ["", "Faults, in order:", "", "| minute | fault | server | detail |", "|---|---|---|---|"]
    lines += [
        f"| {e['t_s'] / 60:.1f} | {e['kind']} | {e.get('server', '')} | {e.get('detail', '')} |"
        for e in f["events"]
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--minutes", type=float, default=32.0, help="how long the fault run trains before it is ended"
    )
    ap.add_argument("--every", type=float, default=55.0, help="seconds between faults")
    ap.add_argument("--out", default="bench/results/training_faults.md")
    ap.add_argument("--workdir", default=None, help="where the runs go (default: a temporary folder)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="training-faults-"))
    model = build_tiny(work / "tiny", expert_texts(["babyai"], 20), size="nano")
    runs, log = work / "runs", work / "log.txt"
    with contextlib.ExitStack() as stack:
        # the fault-free run beside the faulty one, on servers of its own (its time is not the point)
        clean_urls = [stack.enter_context(served(work / f"clean{i}.log")).url for i in range(2)]
        with open(work / "clean.txt", "a") as out:
            clean_job = subprocess.Popen(
                train_command(model, runs, "clean", OPEN_ENDED, clean_urls),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        stack.callback(clean_job.kill)
        servers = [stack.enter_context(served(work / f"server{i}.log")) for i in range(2)]
        proxies = [stack.enter_context(DroppingProxy(s.port)) for s in servers]
        command = train_command(model, runs, "faulty", OPEN_ENDED, [p.url for p in proxies])
        injector = FaultInjector(servers, proxies, command, log, hang_s=STEP_TIMEOUT * 3)
        stack.callback(injector.close)
        faulty_wall = injector.run(args.every, until_s=args.minutes * 60)
        injector.close()
        clean_job.kill()
        clean_job.wait()
        # both end one step after the faulty run's last checkpoint, launched once more
        steps = last_checkpoint(runs / "faulty") + 1
        t0 = time.monotonic()
        run_clean(train_command(model, runs, "faulty", steps, [p.url for p in proxies]), log)
        faulty_wall += time.monotonic() - t0
        run_clean(train_command(model, runs, "clean", steps, clean_urls), work / "clean.txt")
    faulty, clean = audit(runs / "faulty"), audit(runs / "clean")
    rows = compare(faulty.pop("rows"), clean.pop("rows"), steps)
    figures = {
        "command": "python -m bench.experiments.training_faults " + " ".join(sys.argv[1:]),
        "steps": steps, "faulty_wall_s": faulty_wall,
        "faults": sum(injector.counts.values()), "by_kind": dict(injector.counts),
        "trainer_died": sum(e["kind"] == "job_died" for e in injector.events),
        "faulty": faulty, "clean": clean, "events": injector.events,
    }  # fmt: skip
    out = Path(args.out)
    out.write_text(report(args, figures, rows))
    shown = ("return", "success", "env_errors", "sessions_restored", "pg_loss", "kl")
    per_step = [
        {
            "step": r["step"],
            "differ": r["differ"],
            **{f"{side}_{k}": r[side].get(k) for side in ("faulty", "clean") for k in shown},
        }
        for r in rows
    ]
    out.with_suffix(".json").write_text(json.dumps({**figures, "per_step": per_step}, default=str))
    print(json.dumps({k: v for k, v in figures.items() if k != "events"}, default=str))


if __name__ == "__main__":
    main()
