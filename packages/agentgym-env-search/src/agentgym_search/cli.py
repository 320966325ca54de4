"""``agentgym search ...``: serve a retriever, build an index, measure retrieval, regenerate the
embedded questions. Data and retriever flags default to the env's settings (``AGENTGYM_SEARCH_*``)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click


def _retriever_options(model: str | None, url: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    model = model or os.environ.get("AGENTGYM_SEARCH_MODEL")
    url = url or os.environ.get("AGENTGYM_SEARCH_RETRIEVER_URL")
    if model:
        options["model"] = model
    if url:
        options["url"] = url
    return options


def _build(retriever: str | None, corpus: str | None, model: str | None, url: str | None):
    """(name, batcher, corpus or None) for the flags, with the env's defaults."""
    from agentgym_search.data import configured_data
    from agentgym_search.retrievers import shared_retriever

    name = retriever or os.environ.get("AGENTGYM_SEARCH_RETRIEVER", "").strip() or "bm25"
    data = configured_data(corpus=corpus)
    options = _retriever_options(model, url)
    if name != "dense":
        options.pop("model", None)
    if name != "http":
        options.pop("url", None)
    batcher = shared_retriever(name, data.key, data.load_corpus, **options)
    loaded = getattr(batcher.retriever, "corpus", None)
    return name, batcher, loaded, data


_retriever_flags = [
    click.option(
        "--retriever",
        default=None,
        help="bm25 (default), dense, http or a plugin's (default: $AGENTGYM_SEARCH_RETRIEVER or bm25).",
    ),
    click.option(
        "--corpus",
        default=None,
        help="wiki-18 JSON Lines corpus (default: $AGENTGYM_SEARCH_CORPUS, else the embedded one).",
    ),
    click.option("--model", default=None, help="Local sentence-transformers model path, for dense."),
    click.option("--url", default=None, help="Retrieval server URL, for http."),
]


def retriever_flags(f):
    for option in reversed(_retriever_flags):
        f = option(f)
    return f


@click.group()
def search() -> None:
    """The search env's tools: a retrieval server, indexes, retrieval figures, the question generator."""


@search.command("serve-retriever")
@retriever_flags
@click.option("--host", default="127.0.0.1", show_default=True, help="Non-loopback needs --token.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token", default=None, help="Require 'Authorization: Bearer TOKEN' (default: $AGENTGYM_TOKEN)."
)
@click.option("--insecure", is_flag=True, help="Allow a non-loopback address without a token.")
@click.option("--log-level", default="warning", show_default=True)
def serve_retriever(
    retriever: str | None,
    corpus: str | None,
    model: str | None,
    url: str | None,
    host: str,
    port: int,
    token: str | None,
    insecure: bool,
    log_level: str,
) -> None:
    """Serve a retriever over Search-R1's protocol (POST /retrieve), for many env servers to share.

    Env servers use it with AGENTGYM_SEARCH_RETRIEVER=http and
    AGENTGYM_SEARCH_RETRIEVER_URL=http://HOST:PORT.
    """
    import uvicorn
    from agentgym_search.server import create_app

    from agentgym.server.config import KEEP_ALIVE_S
    from agentgym.server.run import check_bind

    token = token or os.environ.get("AGENTGYM_TOKEN") or None
    check_bind(host, token, insecure)
    t0 = time.perf_counter()
    name, batcher, loaded, _ = _build(retriever, corpus, model, url)
    size = len(loaded) if loaded is not None else None
    click.echo(
        f"{name} retriever ready in {time.perf_counter() - t0:.1f} s"
        + (f" over {size} passages" if size else "")
        + f"; serving POST http://{host}:{port}/retrieve (Ctrl-C stops)",
        err=True,
    )
    app = create_app(batcher, name=name, passages=size, token=token)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_keep_alive=KEEP_ALIVE_S)


@search.command("index")
@retriever_flags
def index(retriever: str | None, corpus: str | None, model: str | None, url: str | None) -> None:
    """Build the retriever's index of the corpus and cache it (or load the cached one), and say where."""
    from agentgym_search.cache import cache_root

    t0 = time.perf_counter()
    name, batcher, loaded, _ = _build(retriever, corpus, model, url)
    cached = getattr(batcher.retriever, "loaded_from_cache", None)
    how = "loaded from the cache" if cached else "built"
    size = f"{len(loaded)} passages" if loaded is not None else "a remote index"
    click.echo(f"{name}: {size}, {how} in {time.perf_counter() - t0:.1f} s (cache: {cache_root()})")


@search.command("check")
@retriever_flags
@click.option("--split", default="test", show_default=True, type=click.Choice(["test", "train"]))
@click.option(
    "-k", "--k", "k", default=3, show_default=True, type=click.IntRange(1), help="Passages per query."
)
@click.option(
    "--questions",
    default=None,
    help="Question files (FlashRAG JSON Lines or Parquet; several with commas) instead of the split's.",
)
@click.option("--limit", default=None, type=click.IntRange(1), help="Only the first N questions.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def check(
    retriever: str | None,
    corpus: str | None,
    model: str | None,
    url: str | None,
    split: str,
    k: int,
    questions: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Retrieval figures of a split: recall@k of a passage holding a gold answer, with the question
    as the query (and, for generated questions, with each hop's sub-question), per category."""
    from agentgym_search.data import read_questions
    from agentgym_search.evaluate import retrieval_recall

    name, batcher, _, data = _build(retriever, corpus, model, url)
    if questions:
        asked = [q for path in questions.split(",") if path.strip() for q in read_questions(path.strip())]
    else:
        asked = data.questions[split]
    rows = retrieval_recall(asked[:limit], batcher, k)
    if as_json:
        click.echo(json.dumps({"retriever": name, "split": split, "k": k, "categories": rows}, indent=1))
        return
    click.echo(f"{name}, {questions or split + ' split'}, recall@{k}:")
    click.echo(f"{'category':<36} {'n':>5} {'question':>9} {'all hops':>9}")
    for category, row in rows.items():
        hops = "-" if row["hops"] is None else f"{row['hops']:.3f}"
        click.echo(f"{category:<36} {row['n']:>5} {row['question']:>9.3f} {hops:>9}")


@search.command("generate")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for questions_{test,train}.jsonl.gz and meta.json.",
)
def generate(out: Path) -> None:
    """Regenerate the embedded questions from the embedded Wikipedia leads (deterministic: the
    package's files are its output)."""
    from agentgym_search.generate import Generator, write

    t0 = time.perf_counter()
    gen = Generator()
    meta = write(gen.generate(), gen.corpus, out)
    for split, kinds in meta["splits"].items():
        click.echo(
            f"{split}: {sum(kinds.values())} questions: " + ", ".join(f"{k} {n}" for k, n in kinds.items())
        )
    click.echo(f"written to {out} in {time.perf_counter() - t0:.1f} s", err=True)
    sys.exit(0)
