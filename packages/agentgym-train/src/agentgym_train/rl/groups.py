"""A training step's episodes: ``n`` samples of each task drawn, played by the policy being
trained on the run's envs, and, under ``dynamic_sampling``, more tasks until enough groups have
a sample of nonzero advantage (the ones an update trains on). The task sampler is told every
played episode's success (its pass-rate estimates), and the step reports what it drew."""

from __future__ import annotations

from typing import Any

from agentgym.trajectory import Episode
from agentgym_train.policies.base import Policy, Sampling
from agentgym_train.rl.batch import Estimator, TokenBatch, advantages, episode_score, informative_rows
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rollout.engine import RolloutEngine, RolloutStats, Task
from agentgym_train.rollout.envs import EnvBackend
from agentgym_train.rollout.task_sampling import TaskSampler


class StepGroups:
    """The episodes of each training step, from ``tasks`` (the run's task draws, whose position a
    checkpoint keeps), scored with the run's advantage estimator to tell informative groups."""

    def __init__(
        self,
        cfg: TrainConfig,
        policy: Policy,
        backends: dict[str, EnvBackend],
        tasks: TaskSampler,
        estimator: Estimator,
    ):
        self.cfg, self.policy, self.backends, self.tasks = cfg, policy, backends, tasks
        self.estimator = estimator
        self.drawn_rates: list[float] = []  # the estimates of this step's draws

    def rollout(
        self, step: int, horizon: int, tasks: int | None = None, first_group: int = 0
    ) -> tuple[list[Episode], RolloutStats]:
        """``n`` samples of each of ``tasks`` (default ``tasks_per_step``) drawn tasks; each draw
        is a group (the same task drawn twice in a step forms two groups), numbered from
        ``first_group``."""
        cfg = self.cfg
        draws = self.tasks.draw(tasks or cfg.tasks_per_step)
        self.drawn_rates += [self.tasks.estimate(env, task_id) for env, task_id in draws]
        todo = [
            Task(env, task_id, sample=k, split=cfg.train_split)
            for env, task_id in draws
            for k in range(cfg.n)
        ]
        engine = RolloutEngine(
            self.policy,
            self.backends,
            sampling=Sampling(
                temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens
            ),
            max_turns=horizon,
            batch_size=cfg.rollout_batch,
            max_context=cfg.max_context,
            episode_seed=cfg.episode_seed(step + first_group),
            match_actions=cfg.match_actions,
            format_hint=cfg.format_hint,
            constrain_actions=cfg.constrain_actions,
        )
        episodes = engine.run(todo, close=False)
        for i, ep in enumerate(episodes):
            ep.group = first_group + i // cfg.n
        # an env that failed says nothing of the task's difficulty
        self.tasks.observe(
            (ep.env, ep.task_id, float(ep.success)) for ep in episodes if ep.termination != "error"
        )
        return episodes, engine.stats

    def informative_groups(self, episodes: list[Episode]) -> set[Any]:
        """The groups with a sample of nonzero advantage (the ones an update trains on)."""
        batch = TokenBatch.from_episodes(episodes, self.cfg.reward, self.cfg.reward_params)
        if batch is None:
            return set()
        adv, _ = advantages(batch, self.estimator, invalid_action_penalty=self.cfg.invalid_action_penalty)
        return {batch.groups[i] for i in informative_rows(adv, batch.mask)}

    def sample(self, step: int, horizon: int) -> tuple[list[Episode], RolloutStats, dict[str, Any]]:
        """Step ``step``'s episodes; under ``dynamic_sampling``, more tasks are rolled out (as many as
        informative groups are missing, up to ``dynamic_sampling_rounds`` times) until
        ``tasks_per_step`` groups are informative."""
        cfg = self.cfg
        self.drawn_rates = []
        episodes, stats = self.rollout(step, horizon)
        if not cfg.dynamic_sampling:
            return episodes, stats, self.draw_metrics(episodes)
        rounds, informative = 0, len(self.informative_groups(episodes))
        while informative < cfg.tasks_per_step and rounds < cfg.dynamic_sampling_rounds:
            rounds += 1
            missing = cfg.tasks_per_step - informative
            more, extra = self.rollout(step, horizon, missing, first_group=len(episodes) // cfg.n)
            episodes += more
            stats.add(extra)
            informative = len(self.informative_groups(episodes))
        return (
            episodes,
            stats,
            {**self.draw_metrics(episodes), "sampling_rounds": rounds + 1, "informative_groups": informative},
        )

    def draw_metrics(self, episodes: list[Episode]) -> dict[str, float]:
        """The drawn tasks' mean estimated pass rate (before their episodes were seen), and the
        share of groups whose samples all scored the same (nothing for GRPO to compare)."""
        scores: dict[Any, set[float]] = {}
        for ep in episodes:
            if ep.termination != "error":
                scores.setdefault(ep.group, set()).add(
                    episode_score(ep, self.cfg.reward, self.cfg.reward_params)
                )
        flat = sum(len(s) == 1 for s in scores.values())
        return {
            "task_pass_rate_est": round(sum(self.drawn_rates) / max(1, len(self.drawn_rates)), 4),
            "zero_variance_groups": round(flat / max(1, len(scores)), 4),
        }
