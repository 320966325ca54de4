"""The CLI's policy options reach every backend's factory, which ignores those it does not use;
the training progress bar follows the trainer's callbacks."""

from __future__ import annotations

import pytest
from agentgym_train.policies import make_policy

from agentgym.errors import AgentGymError

EVERY_OPTION = {
    "model": "m",
    "base_url": "http://127.0.0.1:1/v1",
    "api_key": "k",
    "concurrency": 16,
    "device": "cpu",
}


def test_build_policy_passes_the_set_options_each_factory_takes(monkeypatch):
    """A factory gets the options that are set and that it names (a plugin's ``f(model=None)``
    keeps working, and gets no API key); one that takes ``**kwargs`` gets them all."""
    import agentgym_train.policies
    from agentgym_train.cli.evaluate import build_policy
    from agentgym_train.policies import BasePolicy

    calls = []

    def narrow(model=None):
        calls.append({"model": model})
        return BasePolicy()

    def wide(**kw):
        calls.append(kw)
        return BasePolicy()

    factories = {"narrow": narrow, "wide": wide}
    monkeypatch.setattr(agentgym_train.policies, "policy_factory", factories.__getitem__)
    given = {"model": "m", "base_url": None, "api_key": "k", "concurrency": 16, "device": None}
    build_policy("narrow", **given, temperature=1.0)
    build_policy("wide", **given, temperature=1.0)
    assert calls == [{"model": "m"}, {"model": "m", "api_key": "k", "concurrency": 16}]


def test_the_scripted_policy_ignores_the_options_it_does_not_use():
    assert make_policy("scripted", **EVERY_OPTION) is not None


@pytest.mark.parametrize("name", ["hf", "vllm"])
def test_a_model_backend_without_a_model_says_so(name):
    with pytest.raises(AgentGymError, match=f"--policy {name} needs --model"):
        make_policy(name, concurrency=16)


def test_only_engine_options_reach_the_vllm_engine(monkeypatch):
    import agentgym_train.policies.vllm
    from agentgym_train.policies import BasePolicy

    seen = {}

    def fake(model, **kw):  # vLLM's engine is not built: the options it would get are the test
        seen.update(kw, model=model)
        return BasePolicy()

    monkeypatch.setattr(agentgym_train.policies.vllm, "VLLMPolicy", fake)
    make_policy("vllm", **EVERY_OPTION, seed=3, dtype="float32")
    assert seen == {"model": "m", "chat_template": None, "seed": 3, "dtype": "float32"}


def test_the_step_bar_appears_with_the_trainers_first_message_and_ends_on_say():
    from agentgym_train.cli.train import StepBar

    with StepBar("train grpo", 2) as bar:
        bar.say("before the run")
        assert bar.progress is None
        bar.log("setting up")
        assert bar.progress is not None
        metrics = {"step": 1, "horizon": 4, "return": 0.5, "success": 0.5, "time_step": 1.0}
        bar.on_step(metrics)
        assert bar.progress.tasks[0].completed == 1
        bar.say("the summary")
        assert bar.progress is None


def test_a_native_dry_run_checks_the_config_and_says_what_the_run_would_do(tmp_path, capsys):
    import subprocess
    import sys
    from pathlib import Path

    from agentgym.cli import main

    def dry_run(*more: str) -> tuple[int, str, str]:
        """``agentgym train ARGS... --dry-run`` in-process: exit code, stdout, stderr."""
        try:
            main(["train", *args, *more, "--dry-run"])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    args = ["envs=guess", "steps=5", f"runs_dir={tmp_path}", "name=plan"]
    args += ["horizon=scaling_inter", "horizon_params={rounds: [2, 4], every: 3}", "n=2", "tasks_per_step=3"]
    code, out, err = dry_run()
    assert code == 0, err
    assert f"run: {tmp_path / 'plan'} (starts at step 0)" in out
    assert "steps: 5 x 3 tasks x 2 samples = 30 episodes" in out
    assert "horizon: scaling_inter, steps 1-3: 2 turns, steps 4-5: 4 turns" in out
    assert "guess 1000 of 'train'" in out
    assert "envs: in-process" in out
    assert not (tmp_path / "plan").exists()  # nothing written, no model loaded
    code, out, _ = dry_run("--env-url", "http://127.0.0.1:9", "--env-url", "http://127.0.0.1:10")
    assert "envs: sessions on 2 env server(s): http://127.0.0.1:9, http://127.0.0.1:10" in out
    # what the trainer refuses before it writes anything, the dry run refuses too
    code, _, err = dry_run("rollout=vllm")
    assert code != 0 and "vLLM" in err
    # a refusal is one line on stderr, as a user's shell shows it
    agentgym = str(Path(sys.executable).parent / "agentgym")
    bad = [agentgym, "train", *args, "algorithm=ppo2", "--dry-run"]
    bad = subprocess.run(bad, capture_output=True, text=True, timeout=120)
    [line] = bad.stderr.strip().splitlines()
    assert bad.returncode != 0 and line.startswith("agentgym: error: unknown algorithm 'ppo2' (known: ")
