"""The train-task samplers: the difficulty sampler draws tasks near its target pass rate on a
planted set of tasks whose pass rates are known, its state survives a checkpoint round trip (the
same draws as an uninterrupted run), a plugin's sampler is found by name, and bad settings fail
before a model loads."""

from __future__ import annotations

import random
import statistics

import pytest
import torch
from agentgym_train.rl.config import ConfigError, TrainConfig
from agentgym_train.rollout.task_sampling import (
    DifficultySampler,
    TaskPool,
    UniformSampler,
    check_task_sampler,
    make_task_sampler,
)

from agentgym import hookimpl
from agentgym.errors import AgentGymError, UnknownNameError

#: 200 planted tasks in 4 categories: the pass rate of task t is TRUE[t], spread over [0, 1]; the
#: categories hold easy (0.8-1), medium (0.3-0.7), hard (0-0.1) and hopeless (0) tasks
TRUE = {
    t: [0.8 + 0.2 * (t % 50) / 49, 0.3 + 0.4 * (t % 50) / 49, 0.1 * (t % 50) / 49, 0.0][t // 50]
    for t in range(200)
}
CATS = ["easy", "medium", "hard", "hopeless"]


def planted_pool() -> TaskPool:
    return TaskPool({"planted": list(range(200))}, lambda env, t: CATS[t // 50])


def play(sampler, steps: int, tasks: int = 4, n: int = 4, seed: int = 7):
    """``steps`` steps of ``tasks`` groups of ``n`` samples, each sample a success with its task's
    planted pass rate; the true pass rates drawn and the share of groups whose samples all agreed."""
    rng = random.Random(seed)
    drawn, flat = [], 0
    for _ in range(steps):
        draws = sampler.draw(tasks)
        outcomes = [(env, t, float(rng.random() < TRUE[t])) for env, t in draws for _ in range(n)]
        sampler.observe(outcomes)
        for env, t in draws:
            drawn.append(TRUE[t])
            group = {s for e, u, s in outcomes if (e, u) == (env, t)}
            flat += len(group) == 1
    return drawn, flat / (steps * tasks)


def test_the_difficulty_sampler_draws_tasks_near_its_target():
    uniform, u_flat = play(UniformSampler(planted_pool(), seed=0), 150)
    hard, d_flat = play(DifficultySampler(planted_pool(), seed=0), 150)
    late_u, late_d = uniform[200:], hard[200:]  # after the first 50 steps' estimates
    distance_u = statistics.fmean(abs(p - 0.5) for p in late_u)
    distance_d = statistics.fmean(abs(p - 0.5) for p in late_d)
    assert distance_u > 0.3  # uniform: every category alike, mostly far from 0.5
    assert distance_d < 0.22 and distance_d < distance_u - 0.12
    medium = sum(0.3 <= p <= 0.7 for p in late_d) / len(late_d)
    assert medium > 0.6 and sum(0.3 <= p <= 0.7 for p in late_u) / len(late_u) < 0.35
    assert d_flat < u_flat - 0.2  # fewer groups whose samples all agree (nothing to learn from)
    # with exploration off and a target of 0.9 it goes for the easy tasks instead
    easy, _ = play(DifficultySampler(planted_pool(), seed=0, target=0.9, explore=0.0), 100)
    assert sum(p >= 0.8 for p in easy[200:]) / len(easy[200:]) > 0.7


def test_unplayed_tasks_take_their_categorys_estimate_and_its_prior():
    prior = {"easy": 0.9, "medium": 0.5, "hard": 0.05, "hopeless": 0.0}
    sampler = DifficultySampler(planted_pool(), seed=1, prior=prior, explore=0.0)
    first = [t for _, t in sampler.draw(40)]  # nothing played yet: the prior alone
    assert sum(50 <= t < 100 for t in first) >= 25  # weight 1 against 0.26 for the rest: 79%
    assert sampler.estimate("planted", 60) == pytest.approx(0.5)
    sampler.observe([("planted", 60, 0.0)] * 8)  # one medium task fails every time
    # its category's other tasks: the category's rate, (0 + 2 x 0.5 prior) / (8 + 2); the task
    # itself lower still, shrunk toward that rate from its own 0/8
    assert sampler.estimate("planted", 61) == pytest.approx(0.1)
    assert sampler.estimate("planted", 60) == pytest.approx(0.2 / 10)
    assert sampler.estimate("planted", 10) == pytest.approx(0.9)  # another category: untouched


def test_a_step_draws_distinct_tasks_while_it_can():
    pool = TaskPool({"planted": list(range(200))}, lambda env, t: CATS[t // 50])
    sampler = DifficultySampler(pool, seed=2)
    for _ in range(20):
        draws = sampler.draw(8)
        assert len(set(draws)) == 8
    tiny = DifficultySampler(TaskPool({"e": [1, 2]}, lambda env, t: "c"), seed=0)
    assert sorted(t for _, t in tiny.draw(2)) in ([1, 2], [1, 1], [2, 2])
    assert len(tiny.draw(5)) == 5  # more groups than tasks: repeats, no hang


@pytest.mark.parametrize("name", ["uniform", "difficulty"])
def test_a_restored_sampler_draws_what_an_uninterrupted_one_draws(name, tmp_path):
    straight = make_task_sampler(name, planted_pool(), seed=3)
    before = make_task_sampler(name, planted_pool(), seed=3)
    rng_a, rng_b = random.Random(5), random.Random(5)

    def step(sampler, rng):
        draws = sampler.draw(4)
        sampler.observe([(e, t, float(rng.random() < TRUE[t])) for e, t in draws for _ in range(4)])
        return draws

    expected = [step(straight, rng_a) for _ in range(30)]
    got = [step(before, rng_b) for _ in range(15)]
    torch.save(before.state_dict(), tmp_path / "state.pt")  # as a checkpoint writes it
    after = make_task_sampler(name, planted_pool(), seed=99)  # the seed is the checkpoint's now
    after.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=False))
    got += [step(after, rng_b) for _ in range(15)]
    assert got == expected


def test_every_env_is_drawn_and_categories_filter_the_pool():
    pool = TaskPool.of_split(["babyai", "guess"], "train", categories=["GoToRedBall", "small"])
    sampler = DifficultySampler(pool, seed=0)
    draws = sampler.draw(100)
    assert {env for env, _ in draws} == {"babyai", "guess"}
    assert all(t % 40 == 1 for env, t in draws if env == "babyai")  # GoToRedBall is level 1 of 40
    assert all(pool.category(env, t) in ("GoToRedBall", "small") for env, t in draws)


class MySampler(UniformSampler):
    """A third party's sampler: always the first task."""

    def draw(self, k):
        return [(self.envs[0], self.pool.ids[self.envs[0]][0])] * k


class SamplerPlugin:
    @hookimpl
    def agentgym_task_samplers(self):
        return {"first": MySampler}


def test_a_plugins_sampler_is_found_by_name(monkeypatch):
    from agentgym.plugins import get_registry

    get_registry().pm.register(SamplerPlugin(), name="test-sampler-plugin")
    try:
        sampler = make_task_sampler("first", planted_pool(), seed=0)
        assert sampler.draw(3) == [("planted", 0)] * 3
        TrainConfig.from_dict({"envs": ["guess"], "task_sampler": "first"})
    finally:
        get_registry().pm.unregister(name="test-sampler-plugin")


def test_bad_sampler_settings_fail_in_the_config():
    with pytest.raises(ConfigError, match="task_sampler: unknown task sampler 'hardest'.*difficulty"):
        TrainConfig.from_dict({"envs": ["guess"], "task_sampler": "hardest"})
    with pytest.raises(ConfigError, match="task_sampler: .*'difficulty'.*tagret"):
        TrainConfig.from_dict(
            {"envs": ["guess"], "task_sampler": "difficulty", "task_sampler_params": {"tagret": 0.5}}
        )
    with pytest.raises(UnknownNameError):
        check_task_sampler("nope", {})
    with pytest.raises(AgentGymError, match="target and explore"):
        DifficultySampler(planted_pool(), seed=0, target=1.5)
    # values are checked by building the sampler, before a model loads
    for params, match in (
        ({"target": 1.5}, "target and explore"),
        ({"prior": 0.5}, "prior must map category names"),
        ({"prior": {"depth 1": 2}}, "prior must map category names"),
        ({"target": "x"}, "task_sampler: "),
    ):
        with pytest.raises(ConfigError, match=match):
            TrainConfig.from_dict(
                {"envs": ["guess"], "task_sampler": "difficulty", "task_sampler_params": params}
            )


def test_weights_that_all_underflow_draw_uniformly():
    sampler = DifficultySampler(planted_pool(), seed=0, width=0.001, explore=0.0)
    sampler.observe([("planted", t, 1.0) for t in range(200) for _ in range(4)])  # every rate near 1
    drawn = [t for _ in range(50) for _, t in sampler.draw(4)]
    assert len({t // 50 for t in drawn}) == 4  # not the last option every time


def test_verl_refuses_the_difficulty_sampler_and_the_curve_in_one_line(tmp_path):
    from agentgym_train.verl_backend.translate import _refuse_native_only

    for key, value, match in (
        ("task_sampler", "difficulty", "task_sampler=difficulty is native-backend only"),
        ("curve_every", 4, "curve_every .* is native-backend only"),
    ):
        cfg = TrainConfig.from_dict({"envs": ["guess"], key: value})
        with pytest.raises(ConfigError, match=match) as info:
            _refuse_native_only(cfg)
        assert "\n" not in str(info.value)


def test_the_curves_tasks_give_every_category_its_share():
    from agentgym_train.rollout.tasks import get_split, spread_ids

    for env, k in (("babyai", 30), ("textcraft", 30), ("babyai", 6)):
        split = get_split(env, "test")
        ids = spread_ids(env, "test", k)
        assert len(set(ids)) == k and ids == sorted(ids) and set(ids) <= set(split.task_ids)
        counts = {c: sum(t in members for t in ids) for c, members in split.categories.items()}
        for c, members in split.categories.items():  # within one of its proportional share
            assert abs(counts[c] - k * len(members) / len(split.task_ids)) <= 1, (env, k, counts)
    assert spread_ids("textcraft", "test", 500) == list(get_split("textcraft", "test").task_ids)


def test_a_validation_limit_takes_every_category_its_share_not_the_first_ids():
    """SciWorld's test ids come sorted by category: its first 40 are all one kind of task."""
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.validation import val_ids
    from agentgym_train.rollout.tasks import get_split, split_ids

    split = get_split("sciworld", "test")
    assert {split.category_of(t) for t in split_ids("sciworld", "test", 40)} == {"Measure"}
    ids = val_ids(TrainConfig(envs=["sciworld", "textcraft"], val_limit=40))
    assert {split.category_of(t) for t in ids["sciworld"]} == set(split.categories)
    assert len(ids["sciworld"]) == len(ids["textcraft"]) == 40
    assert val_ids(TrainConfig(envs=["textcraft"]))["textcraft"] == split_ids("textcraft", "test")
