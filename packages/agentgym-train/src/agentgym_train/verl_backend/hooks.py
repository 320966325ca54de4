"""The two places verl's v1 trainer takes user code, used to tie a run's keeper in:
``trainer.v1.sampler.custom_sampler`` (our sampler adds the step's agentgym metrics to what verl
logs) and ``trainer.checkpoint_callback_class`` (the horizon schedule's state is saved into each
checkpoint verl writes). The sampler, built by the trainer before any step, in its process, also
installs the advantage patch that hands bridged estimators each row's turns
(:func:`.estimators.patch_compute_advantage`)."""

from __future__ import annotations

from typing import Any

import ray
from omegaconf import OmegaConf
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from agentgym_train.verl_backend.estimators import patch_compute_advantage
from agentgym_train.verl_backend.keeper import get_keeper


def _settings(config: Any) -> dict[str, Any]:
    return OmegaConf.to_container(config, resolve=True) if OmegaConf.is_config(config) else dict(config)


class AgentGymSampler(ReplayBuffer):
    """verl's synchronous replay buffer, plus: it creates the run's keeper (before any rollout)
    and adds the keeper's metrics of each training step to the step's logged metrics; it installs
    the advantage patch in the trainer's process."""

    def __init__(self, *args: Any, sampler_kwargs: Any = None, **kwargs: Any):
        import os

        # verl polls its queue every 2 s: a tenth of a CPU run's step; at scale its own value
        kwargs.setdefault("poll_interval", 0.05 if os.environ.get("VERL_PLATFORM") == "cpu" else 2.0)
        super().__init__(*args, sampler_kwargs=sampler_kwargs, **kwargs)
        self.keeper = get_keeper(_settings(sampler_kwargs), create=True)
        patch_compute_advantage()

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if partition_id == "train":
            metrics = {**metrics, **ray.get(self.keeper.metrics.remote(global_steps))}
        return batch, metrics


class AgentGymCheckpoint(CheckpointCallback):
    """Saves the horizon schedule's state (``adaptive``'s stage) into verl's checkpoint."""

    def on_save(
        self, trainer: Any, global_step: int, checkpoint_dir: str, async_save: bool = False, **_: Any
    ) -> None:
        keeper = get_keeper(_settings(self.config.agentgym))
        ray.get(keeper.save.remote(checkpoint_dir, int(global_step)))
