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

    calls = []

    def narrow(model=None):
        calls.append({"model": model})

    def wide(**kw):
        calls.append(kw)

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

    seen = {}

    def fake(model, **kw):
        seen.update(kw, model=model)

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
