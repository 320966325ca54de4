"""Benchmark: rollout-engine overhead with the scripted policy, against the raw env loop.

    python -m bench.speed.rollout [--env babyai] [--episodes 256] [--batch-size 64] [--max-turns 20]
                            [--servers 2] [--repeat 3] [--tolerance 0]

Every mode runs the same expert on the same tasks: the raw loop resets an env and steps it with
the expert's actions in this process; the rollout engine runs ``--batch-size`` episodes at once
with the scripted policy (prompting, parsing, episode records, batching), on envs in this process
(``in_process``) and on sessions of ``--servers`` env servers over HTTP (``remote``: ``agentgym
serve ENV`` subprocesses on free ports, one worker each, driven through ``RemoteEnvs`` /
``AsyncEnvPool``; the scripted policy then asks the servers for the expert's actions).

Each mode's work is counted where it is done: episodes, resets and ``env.step`` calls (the raw
loop's own calls; the rollout's through a counting wrapper around its env backend) and errors (a
failed reset or step, an episode that ended in error). Prints one JSON object (each mode with its
work), then ``ratio rollout/raw: X`` and ``ratio remote/in_process: X`` (episodes/s; ``--servers
0`` skips the remote mode), each only when both modes ran without errors and did the same work:
the expert is deterministic, so the tolerance (``--tolerance``) is 0 by default, every count
exact; otherwise ``no ratio ...: not the same work (...)``. A benchmark, not a test: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import time

from agentgym_train.policies.scripted import ScriptedPolicy
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs, RemoteEnvs

from agentgym.plugins import get_env_spec
from bench.common.equal_work import ENV_WORK_KEYS, differences
from bench.common.findings import Findings


def raw_loop(spec, ids: list[int], max_turns: int) -> dict:
    env = spec.make()
    episodes = steps = resets = errors = successes = 0
    t0 = time.perf_counter()
    for task_id in ids:
        episodes += 1
        try:
            observation, info = env.reset(options={"task_id": task_id})
            resets += 1
            act = spec.make_expert(env)
            for _ in range(max_turns):
                observation, _, terminated, truncated, info = env.step(act(observation, info))
                steps += 1
                if terminated or truncated:
                    break
        except Exception:  # noqa: BLE001 - counted: the mode then did other work than the others
            errors += 1
            continue
        successes += bool(info.get("success"))
    dt = time.perf_counter() - t0
    return {
        "episodes_per_s": len(ids) / dt,
        "steps_per_s": steps / dt,
        "success": successes / len(ids),
        "episodes": episodes,
        "resets": resets,
        "steps": steps,
        "errors": errors,
    }


class Counted:
    """An env backend that counts the resets (episodes opened, autoresets included) and ``step``
    calls made through it, and the ones that failed; everything else is the wrapped backend's."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.resets = self.steps = self.errors = 0

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    async def open(self, task_ids, seeds):
        handles = await self.backend.open(task_ids, seeds)
        self.resets += len(handles)
        self.errors += sum(h.error is not None for h in handles)
        return handles

    async def step(self, pairs, then=None):
        outcomes = await (self.backend.step(pairs) if then is None else self.backend.step(pairs, then))
        self.steps += len(pairs)
        self.errors += sum(o.error is not None for o in outcomes)
        # episodes a step that ended one started on its session (a remote backend's autoresets)
        self.resets += sum(o.reset is not None and "error" not in o.reset for o in outcomes)
        return outcomes


def rollout(spec, ids: list[int], max_turns: int, batch_size: int, urls: list[str] | None = None) -> dict:
    backend = Counted(RemoteEnvs(spec, urls) if urls else LocalEnvs(spec))
    engine = RolloutEngine(ScriptedPolicy(), {spec.name: backend}, max_turns=max_turns, batch_size=batch_size)
    t0 = time.perf_counter()
    episodes = engine.run([Task(spec.name, t) for t in ids])
    dt = time.perf_counter() - t0
    failed = sum(e.termination == "error" for e in episodes)
    return {
        "episodes_per_s": len(ids) / dt,
        "steps_per_s": backend.steps / dt,
        "success": sum(e.success for e in episodes) / len(ids),
        "generate_s": engine.stats.generate_s,
        "env_s": engine.stats.env_s,
        "episodes": len(episodes),
        "resets": backend.resets,
        "steps": backend.steps,
        "errors": failed,  # episodes that ended in an error (a failed reset or step among them)
        "env_errors": backend.errors,
    }


def best(old: dict | None, new: dict) -> dict:
    return new if old is None or new["episodes_per_s"] > old["episodes_per_s"] else old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="babyai", help="installed env with an expert (default: babyai)")
    ap.add_argument("--split", default="train", help="split whose first ids are the tasks (default: train)")
    ap.add_argument("--episodes", type=int, default=256, help="episodes per mode (default: 256)")
    ap.add_argument(
        "--batch-size", type=int, default=64, help="concurrent episodes in the rollout (default: 64)"
    )
    ap.add_argument("--max-turns", type=int, default=20, help="turn cap (default: 20)")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs per mode; best kept (default: 3)")
    ap.add_argument(
        "--servers", type=int, default=2, help="env servers for the remote mode; 0 skips it (default: 2)"
    )
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="relative difference allowed between two modes' episodes, resets and steps before their "
        "ratio is withheld (default: 0, exact: the expert is deterministic)",
    )
    args = ap.parse_args()
    spec = get_env_spec(args.env)
    ids = list(spec.splits[args.split].task_ids[: args.episodes])
    raw = local = remote = None
    with contextlib.ExitStack() as stack:
        from agentgym.server.background import serve_in_process

        urls = [stack.enter_context(serve_in_process([args.env])).url for _ in range(args.servers)]
        for _ in range(args.repeat):  # alternate so that machine noise hits every mode alike
            raw = best(raw, raw_loop(spec, ids, args.max_turns))
            local = best(local, rollout(spec, ids, args.max_turns, args.batch_size))
            if urls:
                remote = best(remote, rollout(spec, ids, args.max_turns, args.batch_size, urls))
    result = {
        "env": args.env,
        "episodes": len(ids),
        "batch_size": args.batch_size,
        "max_turns": args.max_turns,
        "servers": args.servers,
        "tolerance": args.tolerance,
        "raw_loop": {k: round(v, 3) for k, v in raw.items()},
        "rollout": {k: round(v, 3) for k, v in local.items()},
    }
    pairs = {"rollout/raw": (local, raw, ("rollout", "raw"))}
    if remote is not None:
        result["rollout_remote"] = {k: round(v, 3) for k, v in remote.items()}
        pairs["remote/in_process"] = (remote, local, ("remote", "in_process"))
    why = {
        label: differences(a, b, args.tolerance, names=names, keys=ENV_WORK_KEYS)
        for label, (a, b, names) in pairs.items()
    }
    result["not_equal"] = {label: w for label, w in why.items() if w}
    findings = Findings()
    findings.show(result)
    for label, (a, b, _) in pairs.items():
        findings.ratio(label, a["episodes_per_s"], b["episodes_per_s"], why[label])


if __name__ == "__main__":
    main()
