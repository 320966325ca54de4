"""The policy and env-backend interfaces are declared, not probed: every backend has every member
of ``Policy`` (or ``EnvBackend``), a plugin's policy that lacks one is refused when it is built,
and nothing in the packages asks a policy or a backend by name whether it has a member."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agentgym_train.policies import BasePolicy, Generation, make_policy
from agentgym_train.policies.base import POLICY_MEMBERS, Policy
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import EnvBackend, LocalEnvs, RemoteEnvs

from agentgym import hookimpl
from agentgym.errors import AgentGymError
from agentgym.plugins import get_env_spec, get_registry

PACKAGES = Path(__file__).resolve().parents[2]


class Echo(BasePolicy):
    name = "echo"

    def generate(self, requests, sampling):
        return [Generation("Action: guess 50") for _ in requests]


class Bare:
    """Written against the old interface: ``generate`` alone."""

    name = "bare"

    def generate(self, requests, sampling):
        return [Generation("Action: guess 50") for _ in requests]


class PolicyPlugin:
    @hookimpl
    def agentgym_policies(self):
        return {"echo": lambda **_: Echo(), "bare": lambda **_: Bare()}


@pytest.fixture
def plugin():
    get_registry().pm.register(PolicyPlugin(), name="test-policy-plugin")
    yield
    get_registry().pm.unregister(name="test-policy-plugin")


def test_the_protocol_names_every_member_it_declares():
    declared = {n for n in Policy.__dict__ if not n.startswith("_")} | set(Policy.__annotations__)
    assert declared == set(POLICY_MEMBERS)


def test_a_subclass_of_base_policy_is_a_whole_policy_that_plays(plugin):
    policy = make_policy("echo")
    assert isinstance(policy, Policy)
    assert policy.chat is None and policy.constrains is False
    engine = RolloutEngine(policy, {"guess": LocalEnvs(get_env_spec("guess"))}, max_turns=2)
    (ep,) = engine.run([Task("guess", 1000)])
    assert ep.policy == "echo" and [s.action for s in ep.steps] == ["guess 50", "guess 50"]


def test_a_plugin_policy_missing_members_is_refused_when_built(plugin):
    from agentgym_train.cli.evaluate import build_policy  # agentgym eval's and collect's way

    for build in (make_policy, build_policy):
        with pytest.raises(
            AgentGymError, match=r"policy 'bare' returned Bare, which lacks chat, constrains, "
        ):
            build("bare")


def test_constrained_decoding_is_refused_for_a_policy_that_does_not_constrain(plugin):
    with pytest.raises(AgentGymError, match="constrain_actions needs .* echo cannot"):
        RolloutEngine(
            make_policy("echo"), {"guess": LocalEnvs(get_env_spec("guess"))}, constrain_actions=True
        )


@pytest.mark.parametrize("backend", [LocalEnvs, RemoteEnvs])
def test_both_env_backends_declare_every_member(backend):
    members = {n for n in EnvBackend.__dict__ if not n.startswith("_")} | set(EnvBackend.__annotations__)
    assert {"autoresets", "max_live", "open", "step", "expert", "close", "aclose"} <= members
    per_instance = {"spec", "max_live"}  # set by __init__ from the env's spec and its servers
    assert members - per_instance <= set(dir(backend)), members - per_instance - set(dir(backend))
    assert isinstance(backend.autoresets, bool)


def test_no_module_probes_a_policy_or_a_backend_by_name():
    probe = re.compile(r"\b(?:getattr|hasattr)\(\s*(?:self\.|engine\.)?(?:policy|backend)\s*,")
    found = [
        f"{path.relative_to(PACKAGES)}:{n}"
        for path in PACKAGES.glob("*/src/**/*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if probe.search(line)
    ]
    assert list(PACKAGES.glob("agentgym-train/src/**/engine.py")), "the scan sees the packages"
    assert found == []
