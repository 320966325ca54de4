"""The native trainer: multi-turn RL in one process (torch, CPU or one GPU, Hugging Face models).

Each step (:mod:`agentgym_train.rl.step`, top to bottom): draw tasks from the envs' train splits,
roll out ``n`` samples of each with the model being trained (horizon from the schedule;
``rollout``: sampled by the learner's own model, or by a vLLM engine in this process given its
weights after every update), score them, estimate advantages with the configured algorithm, and
update the policy (the clipped surrogate, a KL term to a frozen reference and an entropy bonus,
over micro-batches bounded by a token budget). The trainer around it: setup, checkpoints and
resumes, validation and the learning curve, metrics and trackers, the final model and report.

A run lives in ``<runs_dir>/<name>/``: ``config.yaml``, ``metrics.jsonl``,
``episodes/step_NNNNNN.jsonl``, ``checkpoints/step_NNNNNN/`` (:mod:`agentgym_train.models.checkpoint`),
``plots/*.png``, ``report.json`` and ``model/`` (the final weights); the trackers named by
``logger`` (:mod:`agentgym_train.tracking.trackers`) get each step's metrics too.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgym.plugins import get_env_spec
from agentgym.trajectory import write_episodes
from agentgym_train.models import checkpoint
from agentgym_train.models.device import default_device, seed_everything
from agentgym_train.models.loading import load_tokenizer
from agentgym_train.models.memory import bound_kernel_cache, one_malloc_arena, peak_memory, release_memory
from agentgym_train.policies.base import Policy
from agentgym_train.policies.hf import HFPolicy
from agentgym_train.policies.vllm import colocated_policy
from agentgym_train.rl import validation
from agentgym_train.rl.batch import Estimator
from agentgym_train.rl.config import ConfigError, TrainConfig
from agentgym_train.rl.groups import StepGroups
from agentgym_train.rl.horizon import make_schedule
from agentgym_train.rl.learner import Learner
from agentgym_train.rl.model_choice import model_for_run
from agentgym_train.rl.specs import get_algorithm
from agentgym_train.rl.step import rl_step
from agentgym_train.rollout.engine import rollout_metrics
from agentgym_train.rollout.envs import make_backend
from agentgym_train.rollout.task_sampling import make_task_sampler
from agentgym_train.rollout.tasks import spread_ids
from agentgym_train.tracking.plots import plot_run, read_metrics
from agentgym_train.tracking.trackers import Trackers, check_available, open_trackers, validation_scalars

#: The metrics that measure the machine rather than the run (seconds, speed, peak memory): they
#: differ between two identical runs, such as a straight run and a resumed one.
TIMING_KEYS = (
    "time_generate",
    "time_env",
    "time_train",
    "time_sync",
    "time_step",
    "cpu_step",
    "tokens_per_s",
    "update_tokens_per_s",
    "peak_rss_gb",
)


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process, every thread of it (the learner, an engine
    and env servers in this process), and of its children that have ended. Not an env server's
    process still running (a JVM, a browser): a step on BabyAI or TextCraft counts whole, one on
    SciWorld or WebArena without its simulators' (a child's CPU counts, all of it, in the step it
    ends in). Per step, it says what wall seconds cannot on a shared machine: the work a step cost."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Trainer:
    def __init__(self, cfg: TrainConfig, *, log: Callable[[str], None] | None = None):
        self.cfg = cfg
        self.log = log or (lambda message: None)
        self.run_dir = Path(cfg.runs_dir) / cfg.name
        self.algo = get_algorithm(cfg.algorithm)
        # a plugin's bad "module:function" fails here
        self.estimator = Estimator(self.algo.estimator(), {**self.algo.params, **cfg.algo_params})
        self.schedule = make_schedule(cfg.horizon, **cfg.horizon_params)
        self.device = default_device()
        self.step = 0
        self.launch_step = 0  # the step this launch started from (a resumed run's checkpoint)
        self.earlier_wall_s = 0.0  # seconds and peak GB of earlier launches of this run (its checkpoint)
        self.earlier_peak_gb = 0.0
        self.launch_t0 = time.perf_counter()
        self.val_history: list[dict[str, Any]] = []
        self.curve: list[dict[str, Any]] = []  # greedy points on a fixed test subset (curve_every)
        self.trackers = Trackers()  # opened at the end of setup

    # -- setup --------------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        preflight(cfg, self.run_dir)
        if not cfg.resume:  # starting over: a later resume would load the earlier run's checkpoints,
            # a reader of the last validation take its episodes where that run was longer
            for earlier in (self.run_dir / "checkpoints", self.run_dir / "episodes"):
                if earlier.is_dir():
                    shutil.rmtree(earlier)
                    self.log(f"resume=false: the run starts over; its earlier {earlier.name} are deleted")
        for sub in ("episodes", "checkpoints", "plots"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        seed_everything(cfg.seed)
        one_malloc_arena()  # before the engine and the envs' threads allocate
        bound_kernel_cache()  # before the first matmul builds a kernel
        path = model_for_run(cfg, self.run_dir, self.log)
        self.tokenizer = load_tokenizer(path)
        self.learner = Learner(cfg, path, critic=self.algo.needs_critic, device=self.device)
        self.policy = self._make_policy(path)
        pool = cfg.train_pool()
        self.sampler = make_task_sampler(cfg.task_sampler, pool, cfg.seed, **cfg.task_sampler_params)
        self.backends = {
            env: make_backend(
                get_env_spec(env), cfg.env_urls, token=cfg.env_token(), max_instances=cfg.max_instances
            )
            for env in cfg.envs
        }
        self.groups = StepGroups(cfg, self.policy, self.backends, self.sampler, self.estimator)
        for env, backend in self.backends.items():
            self.log(f"{env}: {backend.describe()}")
        checkpoint.write_config(self.run_dir, cfg.to_dict())
        if cfg.resume:
            self._resume()
        if self.step:
            self.sync_policy()  # a colocated engine loaded the starting weights, not the checkpoint's
        self.launch_step = self.step
        self._drop_metrics_after(self.step)
        self.trackers = open_trackers(
            cfg.logger, self.run_dir, name=cfg.name, config=cfg.to_dict(), step=self.step
        )

    def _make_policy(self, path: Path) -> Policy:
        """The sampler (``rollout``): the learner's own model, or a vLLM engine in this process
        loaded from the same directory (the learner's starting weights)."""
        if self.cfg.rollout == "hf":
            return HFPolicy(self.learner.model, tokenizer=self.tokenizer, device=self.device)

        return colocated_policy(
            path,
            dtype=self.cfg.dtype,
            seed=self.cfg.seed,
            max_model_len=self.cfg.max_context,
            device=self.device,
            kv_cache_gb=self.cfg.rollout_kv_cache_gb,
        )

    def sync_policy(self) -> float:
        """Give a colocated engine the learner's current weights, so that the next rollout and
        validation sample from them (the hf policy samples from the learner's model itself); the
        seconds it took."""
        t = time.perf_counter()
        self.policy.sync_from(self.learner.model)
        return time.perf_counter() - t

    def _drop_metrics_after(self, step: int) -> None:
        """Metrics logged after the step this run starts from (a run that crashed after its last
        checkpoint, or before its first) are dropped: those steps are run again."""

        metrics = self.run_dir / "metrics.jsonl"
        if metrics.is_file():  # rewritten whole: a torn last line (a killed run) goes too
            keep = [row for row in read_metrics(self.run_dir) if row["step"] <= step]
            checkpoint.atomic_write(metrics, "".join(json.dumps(row) + "\n" for row in keep))

    # -- checkpoints --------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        state = {
            "task_sampler": self.sampler.state_dict(),
            "schedule": self.schedule.state_dict(),
            "val_history": self.val_history,
            "curve": self.curve,
            "wall_s": self.wall_s(),
            "peak_rss_gb": peak_memory()["peak_rss_gb"],
        }
        return checkpoint.save(self.run_dir, self.step, self.learner.state_dict(), state)

    def wall_s(self) -> float:
        """Seconds this run has taken, over every launch of it."""
        return self.earlier_wall_s + time.perf_counter() - self.launch_t0

    def _resume(self) -> None:
        found = checkpoint.checkpoints(self.run_dir)
        if not found:
            return
        weights, state = checkpoint.load(found[-1])
        self.learner.load_state_dict(weights)
        self.step = int(state["step"])
        # a checkpoint from before task samplers kept the uniform draw's random stream alone
        legacy = {"rng": state.get("sampler_rng"), "rates": {"tasks": {}, "cats": {}}}
        self.sampler.load_state_dict(state.get("task_sampler", legacy))
        self.schedule.load_state_dict(state["schedule"])
        self.val_history = state["val_history"]
        self.curve = state.get("curve", [])
        self.earlier_wall_s = float(state.get("wall_s", 0.0))
        self.earlier_peak_gb = float(state.get("peak_rss_gb", 0.0))
        self.log(f"resumed from {found[-1]} (step {self.step})")

    # -- one step (its work: agentgym_train.rl.step) ------------------------------------------
    def train_step(self) -> dict[str, Any]:
        self.step += 1
        horizon = self.schedule(self.step)
        t0, cpu0, restored_before = time.perf_counter(), cpu_seconds(), self._restored()
        episodes_file = self.run_dir / "episodes" / f"step_{self.step:06d}.jsonl"
        done = rl_step(
            self.step,
            horizon,
            self.groups,
            self.learner,
            self.estimator,
            self.cfg,
            keep=lambda episodes: write_episodes(episodes_file, episodes),
        )
        # the update's freed activations go back to the system now, not held through sampling.
        # Not frees_to_system() around it: mapping every block of 1 MB or more afresh made the
        # update 1.9x slower (bench/results/update_mfu.md, as_trainer against beside_engine)
        release_memory()
        sync_s = self.sync_policy()
        t2 = time.perf_counter()
        metrics: dict[str, Any] = {
            "step": self.step,
            "horizon": horizon,
            **rollout_metrics(done.episodes),
            **done.drawn,
            **done.update,
            "time_generate": round(done.rollout.generate_s, 3),
            "time_env": round(done.rollout.env_s, 3),
            "time_train": round(t2 - t0 - done.rollout_s, 3),  # the weight sync included
            **({"time_sync": round(sync_s, 3)} if self.cfg.rollout != "hf" else {}),
            "time_step": round(t2 - t0, 3),
            "cpu_step": round(cpu_seconds() - cpu0, 3),
            "tokens_per_s": round(done.rollout.sampled_tokens / max(done.rollout_s, 1e-9), 1),
            "sessions_restored": self._restored() - restored_before,  # env servers' losses survived
            **peak_memory(),
        }
        self.schedule.update(self.step, metrics)
        if self.cfg.curve_every and (self.step % self.cfg.curve_every == 0 or self.step == self.cfg.steps):
            metrics["curve_success"] = self.curve_point()["success"]
        checkpoint.append_line(self.run_dir / "metrics.jsonl", json.dumps(metrics))
        self.trackers.log(metrics, self.step)
        return metrics

    def _restored(self) -> int:
        return sum(backend.sessions_restored for backend in self.backends.values())

    def validate(self, label: str) -> dict[str, Any]:
        """Evaluate the validation split as configured; the training RNG streams are left untouched.
        Each episode is kept as it ends: a launch resumed from this step's checkpoint (a run cut in
        its validation after the last step) plays only the rest (``validation.kept``)."""
        self._release_idle()
        partial, played, keep = validation.kept(self.run_dir / "episodes", self.step, self.launch_step)
        if played:
            self.log(f"validation at step {self.step}: {len(played)} episodes read back")
        report, episodes = validation.play(
            self.cfg, self.policy, self.step, greedy=False, played=played, on_episode=keep
        )
        entry = validation.entry(self.step, label, report)
        self.val_history.append(entry)
        self.trackers.log(validation_scalars(entry), self.step)
        write_episodes(self.run_dir / "episodes" / f"val_step_{self.step:06d}.jsonl", episodes)
        partial.unlink(missing_ok=True)
        return entry

    def _release_idle(self) -> None:
        async def release() -> None:  # an evaluation makes its own instances, within the same bound
            await asyncio.gather(*(backend.release_idle() for backend in self.backends.values()))

        asyncio.run(release())

    def curve_point(self) -> dict[str, Any]:
        """Greedy success on the fixed test subset now: the learning curve's point at this step."""
        cfg = self.cfg
        self._release_idle()
        ids = {env: spread_ids(env, cfg.val_split, cfg.curve_tasks) for env in cfg.envs}
        report, episodes = validation.play(cfg, self.policy, self.step, greedy=True, task_ids=ids)
        point = validation.entry(self.step, "curve", report)
        self.curve.append(point)
        self.trackers.log({"curve/success": point["success"]}, self.step)
        write_episodes(self.run_dir / "episodes" / f"curve_step_{self.step:06d}.jsonl", episodes)
        self.log(validation.curve_line(point, self.curve[0], cfg.curve_tasks))
        return point

    # -- the loop -----------------------------------------------------------------------------
    def train(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        cfg = self.cfg
        self.launch_t0 = time.perf_counter()
        if cfg.val_before and self.step == 0 and not any(v["step"] == 0 for v in self.val_history):
            self.log("validating before training")
            self.validate("before")
        if cfg.curve_every and self.step == 0 and not self.curve:
            self.curve_point()  # where the curve starts: the starting model
        while self.step < cfg.steps:
            metrics = self.train_step()
            if on_step is not None:
                on_step(metrics)
            last = self.step == cfg.steps
            if cfg.val_every and self.step % cfg.val_every == 0 and not last:
                self.validate(f"step {self.step}")
            if (cfg.save_every and self.step % cfg.save_every == 0) or last:
                self.save_checkpoint()
        if not any(v["step"] == self.step and v["label"] == "after" for v in self.val_history):
            self.validate("after")
            self.save_checkpoint()  # the validation history is part of the run's state
        return self._finish()

    def _finish(self) -> dict[str, Any]:
        """Save the final model, plot the run, write and return its report."""

        model = self.learner.model
        if hasattr(model, "merge_and_unload"):  # LoRA: a plain model directory every command loads
            model = copy.deepcopy(model).merge_and_unload()
        model.save_pretrained(self.run_dir / "model")
        self.tokenizer.save_pretrained(self.run_dir / "model")
        plots = plot_run(self.run_dir, self.val_history, self.curve)
        peak = peak_memory()
        report = {
            "run": str(self.run_dir),
            "steps": self.step,
            "algorithm": self.cfg.algorithm,
            "horizon": self.cfg.horizon,
            "validation": self.val_history,
            "curve": [{"step": p["step"], "success": p["success"]} for p in self.curve],
            "before": next((v["success"] for v in self.val_history if v["label"] == "before"), None),
            "after": self.val_history[-1]["success"] if self.val_history else None,
            # over every launch of the run: a finished run read back by a later launch keeps its figures
            "wall_s": round(self.wall_s(), 1),
            **peak,
            "peak_rss_gb": max(peak["peak_rss_gb"], self.earlier_peak_gb),
            "model": str(self.run_dir / "model"),
            "plots": [str(p) for p in plots],
        }
        checkpoint.atomic_write(self.run_dir / "report.json", json.dumps(report, indent=2))
        return report

    def close(self, failed: bool = False) -> None:
        """Close the envs and the trackers (``failed``: the run stopped on an error)."""

        async def shut() -> None:
            await asyncio.gather(*(b.aclose() for b in self.backends.values()))

        try:
            asyncio.run(shut())
        finally:
            self.trackers.close(failed=failed)
            self.policy.close()  # a colocated engine: its memory goes back now


def preflight(cfg: TrainConfig, run_dir: Path) -> None:
    """What a native run refuses before it writes or loads anything (beyond the config's own
    checks): a vLLM rollout without vLLM, a tracker not installed, a resume under other settings
    than its checkpoints'."""
    if cfg.rollout == "vllm":
        _need_vllm()
    check_available(cfg.logger)
    if cfg.resume and checkpoint.checkpoints(run_dir):
        checkpoint.check_same_settings(run_dir, cfg.to_dict())


def _need_vllm() -> None:
    """A one-line ConfigError when vLLM cannot be imported (``rollout=vllm``)."""
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"rollout=vllm needs vLLM: {str(exc).splitlines()[0] if str(exc) else exc!r} "
            "(pip install 'agentgym-train[vllm]' for the CPU build, or vllm on a GPU)"
        ) from None


def run(
    cfg: TrainConfig,
    *,
    log: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Set up a run, train it to ``cfg.steps`` (resuming from its last checkpoint), close its
    envs; returns the run's report. ``log`` gets progress messages, ``on_start`` the step the run
    starts from (0, or the resumed checkpoint's), ``on_step`` each step's metrics."""
    trainer = Trainer(cfg, log=log)
    trainer.setup()
    failed = True
    try:
        if on_start is not None:
            on_start(trainer.step)
        report = trainer.train(on_step=on_step)
        failed = False
        return report
    finally:
        trainer.close(failed=failed)
