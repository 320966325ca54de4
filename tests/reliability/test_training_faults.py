"""Training through faults: the short version of ``bench/experiments/training_faults.py``.

``agentgym train`` (the nano tiny model, 3 steps) on two ``agentgym serve --workers 2`` servers
behind connection-cutting proxies, while one fault of each kind lands mid-request: a worker
SIGKILLed, a server SIGKILLed and restarted on its port, a worker stopped past ``--step-timeout``,
every connection reset, and the trainer SIGKILLed and launched again. The run finishes, logs each
step once, trains no episode twice, counts every lost episode, and where none was lost its metrics
equal a fault-free run's with the same seeds.
"""

from __future__ import annotations

import contextlib
import json
import sys

import pytest

from agentgym.testing.faults import KINDS, DroppingProxy, FaultInjector, FaultyServer
from agentgym.trajectory import read_episodes, read_jsonl

pytest.importorskip("agentgym_train")


def _command(model, runs, name, urls=()):
    return [sys.executable, "-m", "agentgym", "train", f"name={name}", f"runs_dir={runs}", f"model={model}",
            "envs=babyai", "steps=3", "tasks_per_step=6", "n=2", "max_new_tokens=16", "lr=1e-3",
            "train_limit=50", "horizon=fixed", "horizon_params={horizon: 6}", "constrain_actions=true",
            "save_every=1", "val_before=false", "progress=false", *(f"--env-url={u}" for u in urls)]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_three_training_steps_survive_one_fault_of_each_kind(tmp_path):
    import subprocess

    from agentgym_train.models.tiny import build_tiny
    from agentgym_train.rl.trainer import TIMING_KEYS
    from agentgym_train.rollout.experts import expert_texts

    model = build_tiny(tmp_path / "tiny", expert_texts(["babyai"], 10), size="nano")
    runs, log = tmp_path / "runs", tmp_path / "log.txt"
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(FaultyServer(["babyai"], step_timeout=5.0, log_path=tmp_path / f"s{i}.log"))
            for i in range(2)
        ]
        proxies = [stack.enter_context(DroppingProxy(s.port)) for s in servers]
        command = _command(model, runs, "faulty", [p.url for p in proxies])
        injector = FaultInjector(servers, proxies, command, log)
        stack.callback(injector.close)
        injector.run(every=1.0, most=len(KINDS))
    assert dict(injector.counts) == dict.fromkeys(KINDS, 1), (injector.events, log.read_text()[-3000:])
    assert all(e["on_step"] for e in injector.events), injector.events  # each just after a step request
    subprocess.run(_command(model, runs, "clean"), check=True, capture_output=True, timeout=600)

    def rows(name):
        return [r for _, r in read_jsonl(runs / name / "metrics.jsonl")]

    faulty, clean = rows("faulty"), rows("clean")
    assert [r["step"] for r in faulty] == [1, 2, 3]  # each step logged once: the killed launch's redone
    lost = 0
    for step in (1, 2, 3):
        episodes = list(read_episodes(runs / "faulty" / "episodes" / f"step_{step:06d}.jsonl"))
        assert len({(e.group, e.sample) for e in episodes}) == len(episodes) == 12  # none twice
        lost += sum(e.termination == "error" for e in episodes)
    assert lost == sum(r["env_errors"] for r in faulty)  # every lost episode counted (and not scored)
    assert lost + sum(r["sessions_restored"] for r in faulty) >= 1  # the faults cost sessions
    skip = {*TIMING_KEYS, "tokens_per_s", "peak_rss_gb", "peak_gpu_gb", "sessions_restored"}
    for a, b in zip(faulty, clean, strict=True):
        if a["env_errors"] == 0:
            differ = {k for k in b if k not in skip and a.get(k) != b[k]}
            assert not differ, (
                a["step"],
                sorted(differ),
                json.dumps(injector.events),
                log.read_text()[-2000:],
            )
