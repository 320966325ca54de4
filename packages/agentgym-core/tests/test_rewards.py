"""Reward transforms, and their lookup through the plugin registry."""

from __future__ import annotations

import math
from importlib import metadata

import pytest

from agentgym import rewards
from agentgym.errors import AgentGymError, PluginError
from agentgym.hookspecs import hookimpl
from agentgym.plugins import PluginRegistry, get_registry, reset_registry
from agentgym.trajectory import Episode, Step

BUILTIN_NAMES = {"identity", "normalize", "success_only", "step_penalty", "format_penalty"}


def make_episode(rewards_: list[float], *, success: bool = False, **step_fields) -> Episode:
    steps = [Step(action=f"step {i}", reward=r, **step_fields) for i, r in enumerate(rewards_)]
    return Episode(env="guess", task_id=0, steps=steps, success=success)


@pytest.fixture
def fresh_registry(monkeypatch):
    """The process-wide registry, reloaded from the installed entry points only."""
    monkeypatch.delenv("AGENTGYM_PLUGINS", raising=False)
    monkeypatch.delenv("AGENTGYM_PLUGIN_MODULES", raising=False)
    reset_registry()
    yield get_registry()
    reset_registry()


# ---------------------------------------------------------------------------------------------
# identity
# ---------------------------------------------------------------------------------------------


def test_identity_returns_step_rewards():
    ep = make_episode([0.0, -0.5, 2.0])
    assert rewards.identity(ep) == [0.0, -0.5, 2.0]


def test_identity_returns_a_new_list():
    ep = make_episode([1.0])
    out = rewards.identity(ep)
    out[0] = 99.0
    assert ep.steps[0].reward == 1.0


def test_transforms_on_empty_episode_return_empty():
    ep = make_episode([])
    for name, transform in rewards.BUILTIN_TRANSFORMS.items():
        assert transform(ep) == [], name


# ---------------------------------------------------------------------------------------------
# normalize
# ---------------------------------------------------------------------------------------------


def test_normalize_0_100_score_maps_return_to_unit_interval():
    # A ScienceWorld-like env: score increments adding up to 75 out of 100.
    ep = make_episode([10.0, 0.0, 25.0, 40.0])
    out = rewards.normalize(ep, low=0.0, high=100.0)
    assert len(out) == 4
    assert out == pytest.approx([0.10, 0.0, 0.25, 0.40])
    assert math.fsum(out) == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("step_rewards", "low", "high"),
    [
        ([10.0, 0.0, 25.0, 40.0], 0.0, 100.0),
        ([100.0], 0.0, 100.0),
        ([0.0, 0.0], 0.0, 100.0),
        # A score range with an offset: [-100, 100]; the first step carries the offset.
        ([-100.0, 50.0, 30.0], -100.0, 100.0),
        ([-1.0, 1.0], -1.0, 1.0),
        ([3.0, 4.0], 2.0, 10.0),
    ],
)
def test_normalize_sum_equals_normalised_return(step_rewards, low, high):
    ep = make_episode(step_rewards)
    out = rewards.normalize(ep, low=low, high=high)
    ret = sum(step_rewards)
    assert math.fsum(out) == pytest.approx((ret - low) / (high - low))
    assert len(out) == len(step_rewards)


def test_normalize_extremes_map_to_0_and_1():
    assert math.fsum(rewards.normalize(make_episode([-5.0]), low=-5.0, high=5.0)) == pytest.approx(0.0)
    assert math.fsum(rewards.normalize(make_episode([5.0]), low=-5.0, high=5.0)) == pytest.approx(1.0)


def test_normalize_default_range_is_identity():
    ep = make_episode([0.25, 0.75])
    assert rewards.normalize(ep) == pytest.approx(rewards.identity(ep))


@pytest.mark.parametrize(("low", "high"), [(1.0, 1.0), (100.0, 0.0), (0.0, -1.0)])
def test_normalize_bad_range_raises(low, high):
    with pytest.raises(ValueError, match="high > low"):
        rewards.normalize(make_episode([1.0]), low=low, high=high)


def test_normalize_does_not_modify_episode():
    ep = make_episode([10.0, 20.0])
    rewards.normalize(ep, low=0.0, high=100.0)
    assert ep.rewards == [10.0, 20.0]


# ---------------------------------------------------------------------------------------------
# success_only
# ---------------------------------------------------------------------------------------------


def test_success_only_successful_episode_rewards_last_step():
    ep = make_episode([0.3, 0.0, 0.5], success=True)
    assert rewards.success_only(ep) == [0.0, 0.0, 1.0]


def test_success_only_custom_value():
    ep = make_episode([0.0, 0.0], success=True)
    assert rewards.success_only(ep, value=5.0) == [0.0, 5.0]


def test_success_only_failed_episode_is_all_zeros():
    # Partial credit from the env does not count when the episode failed.
    ep = make_episode([0.3, 0.9, 0.5], success=False)
    assert rewards.success_only(ep) == [0.0, 0.0, 0.0]


def test_success_only_follows_finish():
    ep = make_episode([0.0, 1.0])
    ep.steps[-1].info["success"] = True
    ep.finish()
    assert rewards.success_only(ep) == [0.0, 1.0]


# ---------------------------------------------------------------------------------------------
# step_penalty
# ---------------------------------------------------------------------------------------------


def test_step_penalty_default():
    ep = make_episode([0.0, 0.0, 1.0])
    assert rewards.step_penalty(ep) == pytest.approx([-0.01, -0.01, 0.99])


def test_step_penalty_longer_episode_gets_lower_return():
    short = make_episode([0.0, 1.0])
    long = make_episode([0.0, 0.0, 0.0, 1.0])
    assert sum(rewards.step_penalty(short, penalty=0.1)) > sum(rewards.step_penalty(long, penalty=0.1))
    assert sum(rewards.step_penalty(long, penalty=0.1)) == pytest.approx(1.0 - 4 * 0.1)


# ---------------------------------------------------------------------------------------------
# format_penalty
# ---------------------------------------------------------------------------------------------


def test_format_penalty_penalises_format_errors_and_invalid_actions():
    ep = Episode(
        env="guess",
        task_id=0,
        steps=[
            Step(action="guess 5", reward=0.0),  # fine
            Step(raw_output="I think 5", action=None, reward=0.0),  # did not parse
            Step(action="guess banana", reward=0.0, info={"valid_action": False}),  # env rejected it
            Step(action="guess 7", reward=1.0, info={"valid_action": True}),
        ],
    )
    assert rewards.format_penalty(ep) == pytest.approx([0.0, -0.1, -0.1, 1.0])
    assert rewards.format_penalty(ep, penalty=0.5) == pytest.approx([0.0, -0.5, -0.5, 1.0])


def test_format_penalty_clean_episode_equals_identity():
    ep = make_episode([0.0, 0.5, 1.0])
    assert rewards.format_penalty(ep) == rewards.identity(ep)


def test_format_penalty_keeps_env_reward_on_bad_step():
    ep = Episode(env="guess", task_id=0, steps=[Step(action=None, reward=0.7)])
    assert rewards.format_penalty(ep, penalty=0.2) == pytest.approx([0.5])


# ---------------------------------------------------------------------------------------------
# lookup through the plugin registry
# ---------------------------------------------------------------------------------------------


def test_core_declares_builtin_plugin_entry_point():
    eps = {ep.name: ep for ep in metadata.entry_points(group="agentgym")}
    assert "core" in eps
    assert eps["core"].value == "agentgym.builtin"


def test_get_reward_transform_finds_builtins_through_registry(fresh_registry):
    assert rewards.get_reward_transform("normalize") is rewards.normalize
    assert BUILTIN_NAMES <= set(rewards.reward_transforms())
    core = {p.name: p for p in fresh_registry.plugins()}["core"]
    assert core.module == "agentgym.builtin"
    assert set(core.registers["reward_transforms"]) == BUILTIN_NAMES


def test_core_transforms_load_even_when_plugins_are_restricted(monkeypatch):
    # AGENTGYM_PLUGINS limits loading, but core's built-ins always load.
    monkeypatch.setenv("AGENTGYM_PLUGINS", "core")
    monkeypatch.delenv("AGENTGYM_PLUGIN_MODULES", raising=False)
    registry = PluginRegistry()
    assert set(registry.named("agentgym_reward_transforms")) == BUILTIN_NAMES


def test_get_reward_transform_unknown_lists_known(fresh_registry):
    with pytest.raises(KeyError) as exc:
        rewards.get_reward_transform("no_such_transform")
    message = str(exc.value)
    assert "'no_such_transform'" in message
    for name in BUILTIN_NAMES:
        assert name in message


def test_apply_reward_transform_passes_params(fresh_registry):
    ep = make_episode([50.0, 50.0])
    assert rewards.apply_reward_transform("normalize", ep, low=0.0, high=100.0) == pytest.approx([0.5, 0.5])
    assert rewards.apply_reward_transform("step_penalty", ep, penalty=1.0) == pytest.approx([49.0, 49.0])


def test_a_transform_must_return_one_reward_per_step(fresh_registry):
    class OneForAll:
        @hookimpl
        def agentgym_reward_transforms(self):
            return {"one_for_all": lambda episode: [sum(s.reward for s in episode.steps)]}

    fresh_registry.pm.register(OneForAll(), name="one-for-all")
    with pytest.raises(AgentGymError, match="'one_for_all' returned 1 rewards for an episode of 2 steps"):
        rewards.apply_reward_transform("one_for_all", make_episode([1.0, 0.0]))


def test_a_plugin_returning_no_names_is_reported_not_a_crash(fresh_registry, monkeypatch):
    class Nameless:
        @hookimpl
        def agentgym_reward_transforms(self):
            return [1, 2]  # neither {name: transform} nor objects with a name

    monkeypatch.setattr(fresh_registry, "strict", False)
    fresh_registry.pm.register(Nameless(), name="nameless")
    assert BUILTIN_NAMES <= set(rewards.reward_transforms())  # the others still load
    [problem] = [p for p in fresh_registry.all_problems() if p.plugin == "nameless"]
    assert "agentgym_reward_transforms() returned list, not {name: object}" in problem.reason


def _double(episode: Episode) -> list[float]:
    return [2 * s.reward for s in episode.steps]


class ExtraTransforms:
    @hookimpl
    def agentgym_reward_transforms(self):
        return {"double": _double}


class ClashingTransforms:
    @hookimpl
    def agentgym_reward_transforms(self):
        return {"normalize": _double}


def _registry_with_core() -> PluginRegistry:
    import agentgym.builtin

    registry = PluginRegistry(load=False)
    registry.register(agentgym.builtin, "core")
    return registry


def test_runtime_plugin_adds_transform():
    registry = _registry_with_core()
    assert "double" not in registry.named("agentgym_reward_transforms")
    registry.register(ExtraTransforms(), "extra")
    transforms = registry.named("agentgym_reward_transforms")
    assert transforms["double"] is _double
    assert BUILTIN_NAMES <= set(transforms)
    assert transforms["double"](make_episode([1.0, 2.0])) == [2.0, 4.0]


def test_runtime_plugin_unregister_removes_transform():
    registry = _registry_with_core()
    registry.register(ExtraTransforms(), "extra")
    registry.unregister("extra")
    assert "double" not in registry.named("agentgym_reward_transforms")


def test_duplicate_transform_name_raises_naming_both_plugins():
    registry = _registry_with_core()
    registry.register(ClashingTransforms(), "clash", distribution="clash-dist")
    with pytest.raises(PluginError) as exc:
        registry.named("agentgym_reward_transforms")
    message = str(exc.value)
    assert "'normalize'" in message
    assert "'core'" in message and "'clash'" in message
    assert "clash-dist" in message


def test_duplicate_plugin_name_raises_naming_both_distributions():
    registry = PluginRegistry(load=False)
    registry.register(ExtraTransforms(), "extra", distribution="first-dist")
    with pytest.raises(PluginError) as exc:
        registry.register(ClashingTransforms(), "extra", distribution="second-dist")
    message = str(exc.value)
    assert "'extra'" in message and "first-dist" in message and "second-dist" in message
    # The first registration is untouched.
    assert set(registry.named("agentgym_reward_transforms")) == {"double"}
