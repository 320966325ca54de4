"""The bound on env instances: rollouts hold at most ``max_instances`` per env and queue the rest,
with the same episodes as without the bound (per-episode random streams for sampled policies)."""

from __future__ import annotations

import pytest
from agentgym_train.policies import make_policy
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.trainer import Trainer
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs

from agentgym.plugins import get_env_spec
from agentgym.trajectory import read_episodes


class Watched(LocalEnvs):
    """LocalEnvs that records the most instances it ever lent at once."""

    peak = 0

    async def open(self, task_ids, seeds):
        handles = await super().open(task_ids, seeds)
        self.peak = max(self.peak, self.live)
        return handles


def _run(max_instances, tasks, batch_size=16):
    backend = Watched(get_env_spec("babyai"), max_instances=max_instances)
    engine = RolloutEngine(make_policy("scripted"), {"babyai": backend}, max_turns=12, batch_size=batch_size)
    episodes = engine.run(tasks)
    return episodes, backend


def _fingerprint(episodes):
    return [
        (e.env, e.task_id, [s.action for s in e.steps], [s.reward for s in e.steps], e.termination)
        for e in episodes
    ]


def test_rollout_holds_at_most_the_bound_and_queues_the_rest_in_order():
    tasks = [Task("babyai", t) for t in range(0, 800, 20)]  # 40 tasks over 40 levels' worth of ids
    free, unbounded = _run(None, tasks)
    assert unbounded.peak == 16 and unbounded.bound.limit >= 16  # a cheap env: the batch is the limit
    bounded_eps, bounded = _run(3, tasks)
    assert bounded.peak == 3 and bounded.made == 3  # three instances, each reused for many episodes
    assert [e.task_id for e in bounded_eps] == [t.task_id for t in tasks]
    assert _fingerprint(bounded_eps) == _fingerprint(free)


def test_an_env_that_cannot_be_reused_gets_a_fresh_instance_per_episode(monkeypatch):
    from dataclasses import replace

    spec = get_env_spec("babyai")
    single_use = replace(spec, cost=replace(spec.cost, reusable=False))
    backend = LocalEnvs(single_use, max_instances=2)
    engine = RolloutEngine(make_policy("scripted"), {"babyai": backend}, max_turns=6, batch_size=8)
    episodes = engine.run([Task("babyai", t) for t in range(6)])
    assert len(episodes) == 6 and backend.made == 6 and backend.live == 0


def test_a_task_of_an_env_without_a_backend_names_the_known_ones():
    from agentgym.errors import UnknownNameError

    engine = RolloutEngine(make_policy("scripted"), {"babyai": LocalEnvs(get_env_spec("babyai"))})
    with pytest.raises(UnknownNameError, match="unknown env backend 'babya' .*babyai") as exc:
        engine.run([Task("babyai", 0), Task("babya", 1)])
    assert isinstance(exc.value, KeyError)  # callers that catch a failed lookup keep working


def _config(tiny_model, tmp_path, name, **extra):
    return TrainConfig.from_dict(
        {
            "name": name,
            "runs_dir": str(tmp_path),
            "model": str(tiny_model),
            "envs": ["babyai"],
            "steps": 2,
            "tasks_per_step": 4,
            "n": 2,
            "rollout_batch": 8,
            "max_new_tokens": 8,
            "horizon": "fixed",
            "horizon_params": {"horizon": 3},
            "val_limit": 1,
            "val_n": 1,
            "lr": 1e-3,
            "micro_batch_tokens": 512,
            "progress": False,
            "episode_seeds": True,
            **extra,
        }
    )


@pytest.mark.slow
def test_training_with_a_batch_larger_than_the_bound_gives_the_same_episodes(tiny_model, tmp_path):
    runs = {}
    for name, bound in (("bounded", 2), ("raised", None)):
        trainer = Trainer(_config(tiny_model, tmp_path, name, max_instances=bound))
        trainer.setup()
        try:
            trainer.train()
            runs[name] = trainer.backends["babyai"]
        finally:
            trainer.close()
    assert runs["bounded"].bound.limit == 2 and runs["bounded"].made == 2
    assert runs["raised"].made == 8  # the whole batch at once
    for step in (1, 2):
        a = list(read_episodes(tmp_path / "bounded" / "episodes" / f"step_{step:06d}.jsonl"))
        b = list(read_episodes(tmp_path / "raised" / "episodes" / f"step_{step:06d}.jsonl"))
        assert len(a) == len(b) == 8
        for x, y in zip(a, b, strict=True):
            assert (x.task_id, x.sample, x.return_) == (y.task_id, y.sample, y.return_)
            assert [s.raw_output for s in x.steps] == [s.raw_output for s in y.steps]
            assert x.tokens.ids == y.tokens.ids and x.tokens.loss_mask == y.tokens.loss_mask
            assert x.tokens.logprobs == pytest.approx(y.tokens.logprobs, abs=1e-4)


def test_a_request_with_a_seed_samples_the_same_alone_or_in_a_batch(tiny_model):
    from agentgym_train.policies.base import Request, Sampling
    from agentgym_train.policies.hf import HFPolicy

    policy = HFPolicy(str(tiny_model))
    sampling = Sampling(temperature=1.0, max_new_tokens=12)

    def request(text, seed):
        return Request(messages=[{"role": "user", "content": text}], seed=seed)

    alone = policy.generate([request("Your goal: go to the red ball.", 7)], sampling)[0]
    batch = policy.generate(
        [
            request("I am thinking of a number between 1 and 100.", 3),
            request("Your goal: go to the red ball.", 7),
            request("Higher.", 11),
        ],
        sampling,
    )
    assert batch[1].token_ids == alone.token_ids
    other_seed = policy.generate([request("Your goal: go to the red ball.", 8)], sampling)[0]
    again = policy.generate([request("Your goal: go to the red ball.", 7)], sampling)[0]
    assert again.token_ids == alone.token_ids and other_seed.token_ids != alone.token_ids


def test_two_draws_of_one_task_get_their_own_streams():
    from agentgym_train.policies.base import BasePolicy, Generation

    seen = []

    class Recorder(BasePolicy):
        name = "recorder"

        def generate(self, requests, sampling):
            seen.extend((r.meta["task_id"], r.meta["sample"], r.seed) for r in requests)
            return [Generation(text="Action: turn left") for _ in requests]

    backend = LocalEnvs(get_env_spec("babyai"))
    engine = RolloutEngine(Recorder(), {"babyai": backend}, max_turns=2, episode_seed=7)
    engine.run([Task("babyai", 5, sample=0), Task("babyai", 5, sample=0)])
    seeds = [seed for _, _, seed in seen]
    assert len(seeds) == 4 and len(set(seeds)) == 4  # two episodes x two turns, all distinct
