"""Finding the sources' runs and episode files and reading their JSON and JSON Lines, without SQLite."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentgym_viewer.index.models import Source

#: a run's episodes of a step: train, or validation (``val_``, and the greedy curve's ``curve_``)
STEP_FILE = re.compile(r"^(val_|curve_)?step_(\d+)\.jsonl$")
#: a run directory's metrics logs: JSON Lines, but never episodes
METRICS_FILES = ("metrics.jsonl", "verl_metrics.jsonl")

#: how many levels below a folder given outright runs are looked for: runs/<recipe>/<phase> and
#: a few more, without reading through a whole disk handed over by mistake
MAX_DEPTH = 6
#: folders a run keeps that hold no runs, only many (or big) files a walk would be slow to read
SKIP_DIRS = frozenset({"checkpoints", "model", "plots", "tensorboard", "wandb", "verl", "__pycache__"})

#: an episode file to index: (resolved path, run id, kind, step)
Wanted = tuple[Path, str, str, int | None]


def inside_of(path: Path, roots: Iterable[Path]) -> bool:
    """Whether ``path`` (resolved, symlinks followed) lies inside one of ``roots``."""
    try:
        real = path.resolve()
    except OSError:
        return False
    return any(real == r or real.is_relative_to(r) for r in roots)


def slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-").lstrip(".")
    return slug or "run"


def is_run_dir(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() or (path / "episodes").is_dir()


def looks_like_episodes(path: Path) -> bool:
    """A cheap peek at the first line of a ``.jsonl`` found in a folder (not one named outright)."""
    try:
        with path.open("rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return b'"env"' in head and b'"task_id"' in head


def number(value: Any) -> float | None:
    """``value`` as a finite float, or None (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def integer(value: Any) -> int | None:
    """``value`` if it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def parse_episode(line: bytes) -> tuple | None:
    """The indexed fields of one episode line, or None if it is not one."""
    try:
        d = json.loads(line)
    except ValueError:
        return None
    if not isinstance(d, dict) or "env" not in d:
        return None
    success = d.get("success")
    turns = integer(d.get("num_turns"))
    if turns is None and isinstance(d.get("steps"), list):
        turns = len(d["steps"])
    return (
        str(d["env"]),
        _text(d.get("split")),
        _text(d.get("category")),
        integer(d.get("task_id")),
        _text(d.get("policy")),
        integer(d.get("seed")),
        integer(d.get("sample")),
        None if success is None else int(bool(success)),
        _text(d.get("termination")),
        number(d.get("return", d.get("return_"))),
        turns,
        int(d.get("tokens") is not None),
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file; bad lines (a torn last line too) are skipped."""
    rows = []
    try:
        with path.open("rb") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError:
        return []
    return rows


# verl's file logger writes {"step", "data": {...}} with its own metric names
_VERL_ALIASES = {
    "actor/entropy": "entropy",
    "actor/ppo_kl": "kl",
    "actor/kl_loss": "kl",
    "perf/throughput": "tokens_per_s",
    "critic/score/mean": "return",
}


def verl_row(row: dict[str, Any]) -> dict[str, Any]:
    """One ``verl_metrics.jsonl`` row under our metric names (the originals kept too)."""
    data = row.get("data") if isinstance(row.get("data"), dict) else row
    out: dict[str, Any] = {"step": row.get("step", data.get("step"))}
    for key, value in data.items():
        if key.startswith("agentgym/") and key.count("/") == 1:
            out[key.removeprefix("agentgym/")] = value
    for key, alias in _VERL_ALIASES.items():
        if key in data:
            out.setdefault(alias, data[key])
    for key, value in data.items():
        out.setdefault(key, value)
    return out


def _assign_ids(sources: list[Source]) -> None:
    """Give each source a URL-safe id from its name, numbered when two names slug alike."""
    seen: set[str] = set()
    for source in sources:
        base = slug(source.name)
        sid, k = base, 2
        while sid in seen:
            sid, k = f"{base}-{k}", k + 1
        seen.add(sid)
        source.id = sid


class Scanner:
    """The given sources and the roots nothing outside of is read: the runs and episode files they
    hold, and their JSON files, each parsed again only once its size or mtime changed."""

    def __init__(self, sources: Sequence[Path]):
        self.sources = list(sources)
        self.roots: list[Path] = list(dict.fromkeys(self.sources))
        self._json_cache: dict[Path, tuple[tuple[int, int], Any]] = {}

    def inside(self, path: Path) -> bool:
        """Whether ``path`` (resolved, symlinks followed) lies inside one of the roots."""
        return inside_of(path, self.roots)

    # -- sources ------------------------------------------------------------------------------
    def discover(self) -> list[Source]:
        """The sources under the given paths, in the order found, each with its unique id."""
        found: list[Source] = []
        for given in self.sources:
            if given.is_dir():
                found.extend(self._in_folder(given))
            elif given.is_file():
                source = self._file_source(given, (given,), named=True)
                if source is not None:
                    found.append(source)
        _assign_ids(found)
        return found

    def _in_folder(self, given: Path) -> list[Source]:
        """A folder given outright: a run directory itself, or the runs and files under it."""
        if is_run_dir(given):
            return [self._run_source(given, (given,), given.name)]
        found: list[Source] = []
        self._walk(given, given, 1, found, {given.resolve()})
        return found

    def _walk(self, given: Path, folder: Path, depth: int, found: list[Source], seen: set[Path]) -> None:
        """The runs and files under ``folder`` (``depth`` levels below ``given``), depth first in
        name order; a run is one source, so its own folders are never walked."""
        try:
            children = sorted(folder.iterdir())
        except OSError:
            return
        for child in children:
            if not inside_of(child, (given,)):
                continue  # a symlink out of the folder
            where = child.relative_to(given).as_posix()
            if child.is_dir():
                if child.name.startswith(".") or child.name in SKIP_DIRS:
                    continue
                if is_run_dir(child):
                    found.append(self._run_source(child, (given,), where))
                elif depth < MAX_DEPTH and child.resolve() not in seen:
                    seen.add(child.resolve())  # a symlink back up would walk the same runs again
                    self._walk(given, child, depth + 1, found, seen)
            elif child.is_file():
                # a file directly in the folder is labelled with the folder's name too: a bare
                # "episodes.jsonl" would say nothing of where it is
                label = f"{given.name}/{where}" if depth == 1 and given.name else where
                source = self._file_source(child, (given,), named=False, label=label)
                if source is not None:
                    found.append(source)

    def _run_source(self, path: Path, roots: tuple[Path, ...], name: str) -> Source:
        backend = "verl" if (path / "verl").is_dir() else "native"
        if backend == "native" and self.config(path).get("backend") == "verl":
            backend = "verl"
        return Source(name=name, path=path, backend=backend, roots=roots)

    def _file_source(
        self, path: Path, roots: tuple[Path, ...], *, named: bool, label: str | None = None
    ) -> Source | None:
        name = path.name
        if label is None:
            label = f"{path.parent.name}/{name}" if path.parent.name else name
        if name.endswith(".episodes.jsonl"):
            report = path.with_name(name.removesuffix(".episodes.jsonl") + ".json")
            if not named and report.is_file():
                return None  # listed through its report
            if named:
                self._add_root(report)
            return Source(label, path, "eval", roots, report=report, episodes_file=path)
        if name.endswith(".json"):
            episodes = path.with_name(name.removesuffix(".json") + ".episodes.jsonl")
            if not named and not episodes.is_file():
                return None  # some other JSON file
            if named:
                self._add_root(episodes)
            return Source(label, path, "eval", roots, report=path, episodes_file=episodes)
        if name.endswith(".jsonl") and name not in METRICS_FILES:
            if not named and not looks_like_episodes(path):
                return None
            return Source(label, path, "files", roots, episodes_file=path)
        return None

    def _add_root(self, path: Path) -> None:
        """A report named outright brings its sibling episodes file along (and the reverse)."""
        real = path.resolve()
        if real not in self.roots:
            self.roots.append(real)

    # -- episode files ------------------------------------------------------------------------
    def source_files(self, source: Source) -> list[tuple[Path, str, int | None]]:
        """The episode files of a source, each with its kind and step."""
        files: list[tuple[Path, str, int | None]] = []
        roots = (*source.roots, *(r for r in self.roots if r not in source.roots))
        if source.is_run:
            episodes = source.path / "episodes"
            if episodes.is_dir():
                for p in sorted(episodes.glob("*.jsonl")):
                    m = STEP_FILE.match(p.name)
                    if m:
                        files.append((p, "val" if m.group(1) else "train", int(m.group(2))))
                    else:
                        files.append((p, "file", None))
            for p in sorted(source.path.glob("*.episodes.jsonl")):
                files.append((p, "eval", None))
        elif source.episodes_file is not None:
            files.append((source.episodes_file, "eval" if source.backend == "eval" else "file", None))
        return [(p, kind, step) for p, kind, step in files if p.is_file() and inside_of(p, roots)]

    def wanted(self, sources: Iterable[Source]) -> dict[str, Wanted]:
        """The episode files of ``sources`` by resolved path; a file two sources share is the first's."""
        wanted: dict[str, Wanted] = {}
        for source in sources:
            for path, kind, step in self.source_files(source):
                real = path.resolve()
                wanted.setdefault(str(real), (real, source.id, kind, step))
        return wanted

    # -- JSON files ---------------------------------------------------------------------------
    def load_json(self, path: Path) -> Any:
        """A JSON (or YAML, or JSON Lines) file's content, cached by its size and mtime; {} when
        unreadable or outside the roots."""
        try:
            st = path.stat()
        except OSError:
            return {}
        stamp = (st.st_size, st.st_mtime_ns)
        hit = self._json_cache.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value: Any = {}
        if self.inside(path):
            try:
                if path.suffix in (".yaml", ".yml"):
                    import yaml

                    value = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
                elif path.suffix == ".jsonl":
                    value = read_jsonl(path)
                else:
                    value = json.loads(path.read_text(encoding="utf-8"))
            except Exception:  # unreadable or malformed (YAML raises its own errors): show none
                value = {}
        self._json_cache[path] = (stamp, value)
        return value

    def config(self, run_dir: Path) -> dict[str, Any]:
        """The run's ``config.yaml``, or {}."""
        config = self.load_json(run_dir / "config.yaml")
        return config if isinstance(config, dict) else {}
