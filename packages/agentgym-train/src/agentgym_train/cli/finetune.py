"""``agentgym sft``, ``dpo`` and ``evolve``: fine-tuning on episode files, with the options that
load the model they train (dtype, LoRA, gradient checkpointing)."""

from __future__ import annotations

import json
from typing import Any

import click

from agentgym_train.cli import ui

MODEL_HELP = "HF model directory, .gguf file (imported once, cached) or 'smollm2' (the default real model)."
DTYPE_HELP = (
    "auto: float32 weights for a full fine-tune; with --lora a bfloat16 base where the hardware computes "
    "in it natively (GPU; CPU with AMX/AVX512-BF16: SmolLM2 forward+backward 1.6x the float32 speed here)."
)


def training_model_options(fn: Any) -> Any:
    """``--dtype``, ``--lora``, ``--lora-r``, ``--gradient-checkpointing`` (sft, dpo, evolve)."""
    options = [
        click.option(
            "--dtype",
            type=click.Choice(["auto", "float32", "bfloat16"]),
            default="auto",
            show_default=True,
            help=DTYPE_HELP,
        ),
        click.option(
            "--lora",
            is_flag=True,
            help="Train LoRA adapters on every linear layer (merged into the saved model).",
        ),
        click.option("--lora-r", default=16, show_default=True, type=click.IntRange(1), help="LoRA rank."),
        click.option(
            "--gradient-checkpointing/--no-gradient-checkpointing",
            default=True,
            show_default=True,
            help="Recompute activations in backward: a fraction of the memory for about a third more time.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _loading(kw: dict[str, Any]) -> Any:
    from agentgym_train.models.loading import TrainingModel

    return TrainingModel(
        dtype=kw.pop("dtype"),
        lora_r=kw.pop("lora_r") if kw.pop("lora") else 0,
        lora_alpha=32,
        gradient_checkpointing=kw.pop("gradient_checkpointing"),
    )


def _sft_progress(progress: Any) -> Any:
    """An SFT ``on_step`` callback moving a new bar of ``progress``: step, epoch and loss."""
    bar = progress.add_task("sft", total=None, status="")

    def on_step(r: dict[str, Any]) -> None:
        status = f"epoch {r['epoch']} loss {r['loss']:.4f}"
        progress.update(bar, completed=r["step"], total=r["total"], status=status)

    return on_step


def _print_summary(summary: dict[str, Any]) -> None:
    ui.console().print_json(json.dumps(summary))
    if "peak_rss_gb" in summary:
        click.echo(
            f"peak memory: {summary['peak_rss_gb']} GB RSS, time {summary.get('wall_s', 0)} s", err=True
        )


@click.command("sft")
@click.option("--model", required=True, help=MODEL_HELP)
@click.option(
    "--data",
    "data",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help="Episode JSONL or AgentGym-format file(s); repeat for several.",
)
@click.option(
    "--output", "-o", required=True, type=click.Path(file_okay=False), help="Directory for the model."
)
@click.option("--epochs", default=3, show_default=True, type=click.IntRange(1))
@click.option("--lr", default=1e-5, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option(
    "--batch-size", default=16, show_default=True, type=click.IntRange(1), help="Episodes per step."
)
@click.option(
    "--max-len", default=2048, show_default=True, type=click.IntRange(16), help="Tokens per episode (cut)."
)
@click.option(
    "--successes-only/--all", default=True, show_default=True, help="Train on successful episodes only."
)
@click.option(
    "--micro-batch-tokens",
    default=2048,
    show_default=True,
    type=click.IntRange(16),
    help="Padded tokens per forward pass (gradient accumulation); lower it to use less memory.",
)
@click.option(
    "--autocast",
    type=click.Choice(["on", "off", "auto"]),
    default="off",
    is_flag=False,
    flag_value="on",
    show_default=True,
    help="Compute forward and backward in bfloat16 over float32 weights (mixed precision; a bare "
    "--autocast is on): faster where the hardware computes in bfloat16 natively (GPU; CPU with "
    "AMX/AVX512-BF16), tens of times slower where it is emulated (it warns); auto: on only where native.",
)
@training_model_options
@click.option("--seed", default=0, show_default=True, type=int)
def sft_command(model, data, output, epochs, lr, batch_size, max_len, successes_only, seed, autocast, **kw):
    """Supervised fine-tuning on episodes: loss on the assistant's tokens only.

    \b
    agentgym collect --env babyai --policy scripted --limit 800 -o demos.jsonl
    agentgym sft --model ./tiny --data demos.jsonl --output ./tiny-sft --lr 1e-3
    """
    from agentgym_train.finetune.sft import read_data, sft

    ui.quiet_transformers()
    episodes = read_data(data)
    if successes_only:
        episodes = [e for e in episodes if e.success or not e.steps]  # AgentGym-format items carry no steps
    with ui.progress("sft") as progress:
        on_step = _sft_progress(progress)

        summary = sft(
            model,
            episodes,
            output,
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            max_len=max_len,
            seed=seed,
            autocast={"on": True, "off": False, "auto": "auto"}[autocast],
            micro_batch_tokens=kw.pop("micro_batch_tokens"),
            loading=_loading(kw),
            on_step=on_step,
        )
    _print_summary(summary)


@click.command("dpo")
@click.option("--model", required=True, help=MODEL_HELP + " Also the reference.")
@click.option(
    "--data",
    "data",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help="Episode JSONL with several samples per task (e.g. agentgym eval --n 4 ... episodes).",
)
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False))
@click.option("--beta", default=0.1, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(1))
@click.option("--lr", default=1e-5, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option("--batch-size", default=8, show_default=True, type=click.IntRange(1), help="Pairs per step.")
@training_model_options
@click.option("--seed", default=0, show_default=True, type=int)
def dpo_command(model, data, output, beta, epochs, lr, batch_size, seed, **kw):
    """Direct preference optimisation on pairs (same task: a success and a failure).

    \b
    agentgym eval --env babyai --split train --limit 200 --n 4 --policy hf --model ./sft -o samples.json
    agentgym dpo --model ./sft --data samples.episodes.jsonl --output ./dpo
    """
    from agentgym.errors import AgentGymError
    from agentgym_train.finetune.sft import dpo, preference_pairs, read_data

    ui.quiet_transformers()
    pairs = preference_pairs(read_data(data), seed)
    if not pairs:
        raise AgentGymError(
            "no preference pairs in the data: it needs a success and a failure of the same task"
        )
    with ui.progress("dpo") as progress:
        bar = progress.add_task("dpo", total=None, status="")
        summary = dpo(
            model,
            pairs,
            output,
            beta=beta,
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            seed=seed,
            loading=_loading(kw),
            on_step=lambda r: progress.update(
                bar, completed=r["step"], status=f"loss {r['loss']:.4f} acc {r['reward_accuracy']:.2f}"
            ),
        )
    _print_summary(summary)


@click.command("evolve")
@click.option("--model", required=True, help="Base model: " + MODEL_HELP)
@click.option(
    "--data", "data", multiple=True, required=True, type=click.Path(dir_okay=False), help="Expert episodes."
)
@click.option("--env", "env_names", multiple=True, required=True, help="Env name(s) to explore.")
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False))
@click.option("--iterations", default=4, show_default=True, type=click.IntRange(1))
@click.option(
    "--samples", default=3, show_default=True, type=click.IntRange(1), help="Exploration samples per task."
)
@click.option(
    "--limit", default=200, show_default=True, type=click.IntRange(1), help="Train tasks explored per env."
)
@click.option(
    "--epochs", default=3, show_default=True, type=click.IntRange(1), help="SFT epochs per iteration."
)
@click.option("--lr", default=1e-5, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option(
    "--val-n",
    default=1,
    show_default=True,
    type=click.IntRange(0),
    help="Test samples per task after each iteration (0: skip).",
)
@training_model_options
def evolve_command(model, data, env_names, output, iterations, samples, limit, epochs, lr, val_n, **kw):
    """AgentEvol: explore, keep successes (one per task), SFT from the base on expert + kept; repeat.

    \b
    agentgym evolve --model ./tiny --data demos.jsonl --env babyai --output runs/evolve --iterations 4
    """
    from agentgym_train.finetune.evolve import evolve
    from agentgym_train.finetune.sft import read_data

    ui.quiet_transformers()
    envs = ui.parse_env_names(env_names)
    with ui.progress("evolve sft") as progress:
        on_step = _sft_progress(progress)

        summary = evolve(
            model,
            read_data(data),
            envs,
            output,
            iterations=iterations,
            samples=samples,
            explore_limit=limit,
            val_n=val_n,
            sft_options={"epochs": epochs, "lr": lr, "loading": _loading(kw), "on_step": on_step},
            log=lambda m: click.echo(m, err=True),
        )
    _print_summary(summary)


COMMANDS = (sft_command, dpo_command, evolve_command)
