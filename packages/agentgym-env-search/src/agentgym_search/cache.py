"""Where built indexes live: ``$AGENTGYM_SEARCH_CACHE`` or ``~/.cache/agentgym/search``, one folder
per (retriever, settings, corpus content hash), so an index is built once per corpus and reused by
every later process, and a changed corpus never meets a stale index."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    root = os.environ.get("AGENTGYM_SEARCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "agentgym", "search"
    )
    return Path(root)


def index_dir(kind: str, corpus_digest: str, settings: str = "") -> Path:
    """The folder of one index (not created)."""
    tag = f"-{settings}" if settings else ""
    return cache_root() / f"{kind}{tag}-{corpus_digest[:16]}"


def publish(build_dir: Path, final: Path) -> None:
    """Move a finished build into place atomically; a concurrent builder that won keeps its copy."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(build_dir, final)
    except OSError:  # another process published first (the target is a non-empty folder)
        import shutil

        shutil.rmtree(build_dir, ignore_errors=True)


def build_dir_for(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))


def remembered_digest(key: tuple[str, int, int], digest: str | None = None) -> str | None:
    """Read (or, with ``digest``, record) a file's content hash for its (path, size, mtime)."""
    path = cache_root() / "digests.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    name = f"{key[0]}|{key[1]}|{key[2]}"
    if digest is None:
        value = known.get(name)
        return value if isinstance(value, str) else None
    known[name] = digest
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs a re-hash next time
    return digest
