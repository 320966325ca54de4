"""``agentgym serve-model``: a local model behind an OpenAI-compatible chat-completions server."""

from __future__ import annotations

import click

from agentgym_train.cli import ui


@click.command("serve-model")
@click.argument("model")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port.")
@click.option("--name", "served_name", help="The model id clients name (default: the directory's name).")
@click.option("--device", default="cpu", show_default=True, help="torch device.")
@click.option(
    "--dtype",
    type=click.Choice(["auto", "float32", "bfloat16"]),
    default="auto",
    show_default=True,
    help="auto is bfloat16 where the hardware computes in it natively, else float32.",
)
@click.option(
    "--max-tokens",
    default=512,
    show_default=True,
    type=click.IntRange(1),
    help="Reply length for a request that sets none (always within the model's context).",
)
def serve_model_command(
    model: str, host: str, port: int, served_name: str | None, device: str, dtype: str, max_tokens: int
) -> None:
    """Serve MODEL (a Hugging Face model directory, a .gguf file or 'smollm2') at /v1/models and
    /v1/chat/completions, OpenAI-compatible and non-streaming, sampled by the hf policy's code.

    \b
    agentgym serve-model ./tiny --port 8000 &
    agentgym eval --env babyai --policy openai --base-url http://127.0.0.1:8000/v1
    """
    import uvicorn

    from agentgym.server.config import KEEP_ALIVE_S
    from agentgym_train.serving.server import ModelServer, create_app

    ui.quiet_transformers()
    server = ModelServer(model, name=served_name, device=device, dtype=dtype, max_tokens=max_tokens)
    ui.console().print(f"serving {server.name!r} at http://{host}:{port}/v1", highlight=False)
    uvicorn.run(
        create_app(server), host=host, port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S
    )


COMMANDS = (serve_model_command,)
