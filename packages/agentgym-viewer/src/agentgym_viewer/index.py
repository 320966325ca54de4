"""The viewer's index: one SQLite row per episode, pointing at its line in its JSON Lines file.

Sources are run directories (``metrics.jsonl`` and/or ``episodes/``), folders holding run
directories, episodes ``.jsonl`` files and evaluation reports (``eval.json``, whose episodes are the
sibling ``eval.episodes.jsonl``). The index lives in ``$AGENTGYM_VIEWER_CACHE`` (default
``~/.cache/agentgym/viewer``), one database per set of sources, so reopening the same folders reads
nothing that did not change: files are keyed by (resolved path, size, mtime), and a file that grew
(a live run appending episodes) is read from where the index stopped. Episode texts stay in their
files; a page reads the one line it shows by its byte offset, and a text search scans the byte
ranges of the rows that pass the other filters.

Nothing outside the given sources ("roots") is read: every path is resolved and checked with
``Path.is_relative_to`` before it is opened, so a symlink pointing elsewhere is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.trajectory import Episode

SCHEMA_VERSION = 1
STEP_FILE = re.compile(r"^(val_)?step_(\d+)\.jsonl$")
#: ``refresh()`` re-stats the sources at most this often (seconds) unless forced.
REFRESH_EVERY = 3.0
#: rows inserted per transaction while indexing
BATCH = 2000
#: bytes hashed at the start of a file and before where indexing stopped, to tell an appended file
#: (continue from where we stopped) from a rewritten one (index it again)
PROBE = 4096
#: a text search scans for at most this long per request, then the page offers to continue
SEARCH_BUDGET_S = 0.5
KINDS = ("train", "val", "eval", "file")
SORTS = {
    "step": "step IS NULL, step, id",
    "-step": "step IS NULL, step DESC, id DESC",
    "return": "ret IS NULL, ret, id",
    "-return": "ret IS NULL, ret DESC, id",
    "turns": "num_turns, id",
    "-turns": "num_turns DESC, id",
    "task": "env, task_id, id",
    "-task": "env DESC, task_id DESC, id DESC",
}
PLOT_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")

_COLUMNS = (
    "id, run_id, file_id, offset, length, step, kind, env, split, category, task_id, policy, seed, "
    "sample, success, termination, ret, num_turns, has_tokens"
)
_DDL = """
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT UNIQUE NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    step INTEGER,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    indexed_to INTEGER NOT NULL,
    head BLOB,
    tail BLOB
);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    file_id INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    step INTEGER,
    kind TEXT NOT NULL,
    env TEXT,
    split TEXT,
    category TEXT,
    task_id INTEGER,
    policy TEXT,
    seed INTEGER,
    sample INTEGER,
    success INTEGER,
    termination TEXT,
    ret REAL,
    num_turns INTEGER,
    has_tokens INTEGER
);
CREATE INDEX IF NOT EXISTS episodes_run ON episodes (run_id, kind, step);
CREATE INDEX IF NOT EXISTS episodes_task ON episodes (env, task_id);
CREATE INDEX IF NOT EXISTS episodes_file ON episodes (file_id, offset);
"""


def cache_dir() -> Path:
    return Path(os.environ.get("AGENTGYM_VIEWER_CACHE") or Path.home() / ".cache" / "agentgym" / "viewer")


@dataclass
class RunInfo:
    """One source as the runs page lists it: a training run, an eval report, or an episodes file."""

    id: str
    name: str
    path: Path
    backend: str  # native | verl | eval | files
    envs: list[str]
    steps: int | None
    best_success: float | None
    last_success: float | None
    episodes: int
    config: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)


@dataclass
class Page:
    """One page of :meth:`Index.query`. With a text search ``total`` is None: the scan stops once
    the page is full (``scanned`` rows read, ``matched`` found so far, ``complete`` when every row
    passing the other filters was read; ``candidates`` is how many do)."""

    rows: list[dict[str, Any]]
    total: int | None
    page: int
    per_page: int
    scanned: int | None = None
    matched: int | None = None
    complete: bool = True
    candidates: int | None = None
    more: bool = False  # a text search has (or may have) matches after this page

    @property
    def pages(self) -> int | None:
        return None if self.total is None else max(1, math.ceil(self.total / self.per_page))

    @property
    def has_prev(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        if self.total is None:
            return self.more
        return self.page * self.per_page < self.total


@dataclass
class _Source:
    name: str
    path: Path  # the run dir, or the report / episodes file
    backend: str
    roots: tuple[Path, ...]
    report: Path | None = None
    episodes_file: Path | None = None
    id: str = ""


@dataclass
class _Scan:
    """A text search's progress, kept so the next page (or "continue") resumes where it stopped."""

    scanned: int = 0
    matches: list[int] = field(default_factory=list)
    done: bool = False


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-").lstrip(".")
    return slug or "run"


def _is_run_dir(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() or (path / "episodes").is_dir()


def _looks_like_episodes(path: Path) -> bool:
    """A cheap peek at the first line of a ``.jsonl`` found in a folder (not one named outright)."""
    try:
        with path.open("rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return b'"env"' in head and b'"task_id"' in head


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _parse(line: bytes) -> tuple | None:
    """The indexed fields of one episode line, or None if it is not one."""
    try:
        d = json.loads(line)
    except ValueError:
        return None
    if not isinstance(d, dict) or "env" not in d:
        return None
    success = d.get("success")
    turns = _integer(d.get("num_turns"))
    if turns is None and isinstance(d.get("steps"), list):
        turns = len(d["steps"])
    return (
        str(d["env"]),
        _text(d.get("split")),
        _text(d.get("category")),
        _integer(d.get("task_id")),
        _text(d.get("policy")),
        _integer(d.get("seed")),
        _integer(d.get("sample")),
        None if success is None else int(bool(success)),
        _text(d.get("termination")),
        _number(d.get("return", d.get("return_"))),
        turns,
        int(d.get("tokens") is not None),
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
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


def _verl_row(row: dict[str, Any]) -> dict[str, Any]:
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


class Index:
    """The episodes of ``sources`` in an on-disk SQLite index (see the module docstring).

    ``progress(files_done, files_total, episodes)`` is told how indexing goes. Safe to share between
    threads: one connection, used under a lock.
    """

    def __init__(
        self,
        sources: Sequence[str | Path],
        *,
        cache: str | Path | None = None,
        progress: Callable[[int, int, int], None] | None = None,
        search_budget_s: float = SEARCH_BUDGET_S,
    ):
        self.sources = [Path(s).expanduser().resolve() for s in sources]
        self.roots: list[Path] = list(dict.fromkeys(self.sources))
        self.search_budget_s = search_budget_s
        self._progress = progress
        self._lock = threading.RLock()
        self._version = 1
        self._data_version = None
        self._last_refresh = -math.inf
        self._src: list[_Source] = []
        self._by_id: dict[str, _Source] = {}
        self._paths: dict[int, Path] = {}
        self._cache: dict[Any, Any] = {}
        self._scans: OrderedDict[Any, _Scan] = OrderedDict()
        self._json_cache: dict[Path, tuple[tuple[int, int], Any]] = {}
        key = hashlib.sha1("\0".join(str(p) for p in self.sources).encode()).hexdigest()[:16]
        directory = Path(cache) if cache is not None else cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        self.db_path = directory / f"index-{key}.sqlite3"
        self._db = self._connect()
        self.refresh(force=True)

    # -- storage ------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, check_same_thread=False, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            # an index written by another version of the viewer: it is only a cache, start over
            db.executescript("DROP TABLE IF EXISTS episodes; DROP TABLE IF EXISTS files;")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.executescript(_DDL)
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def inside(self, path: Path) -> bool:
        """Whether ``path`` (resolved, symlinks followed) lies inside one of the roots."""
        try:
            real = path.resolve()
        except OSError:
            return False
        return any(real == root or real.is_relative_to(root) for root in self.roots)

    # -- discovery ----------------------------------------------------------------------------
    def _discover(self) -> list[_Source]:
        found: list[_Source] = []
        for given in self.sources:
            if given.is_dir():
                if _is_run_dir(given):
                    found.append(self._run_source(given, (given,)))
                    continue
                try:
                    children = sorted(given.iterdir())
                except OSError:
                    continue
                for child in children:
                    if not self._inside_of(child, (given,)):
                        continue  # a symlink out of the folder
                    if child.is_dir() and _is_run_dir(child):
                        found.append(self._run_source(child, (given,)))
                    elif child.is_file():
                        source = self._file_source(child, (given,), named=False)
                        if source is not None:
                            found.append(source)
            elif given.is_file():
                source = self._file_source(given, (given,), named=True)
                if source is not None:
                    found.append(source)
        seen: set[str] = set()
        for source in found:
            base = _slug(source.name)
            sid, k = base, 2
            while sid in seen:
                sid, k = f"{base}-{k}", k + 1
            seen.add(sid)
            source.id = sid
        return found

    @staticmethod
    def _inside_of(path: Path, roots: Iterable[Path]) -> bool:
        try:
            real = path.resolve()
        except OSError:
            return False
        return any(real == r or real.is_relative_to(r) for r in roots)

    def _run_source(self, path: Path, roots: tuple[Path, ...]) -> _Source:
        backend = "verl" if (path / "verl").is_dir() else "native"
        if backend == "native" and self._config(path).get("backend") == "verl":
            backend = "verl"
        return _Source(name=path.name, path=path, backend=backend, roots=roots)

    def _file_source(self, path: Path, roots: tuple[Path, ...], *, named: bool) -> _Source | None:
        name = path.name
        label = f"{path.parent.name}/{name}" if path.parent.name else name
        if name.endswith(".episodes.jsonl"):
            report = path.with_name(name.removesuffix(".episodes.jsonl") + ".json")
            if not named and report.is_file():
                return None  # listed through its report
            if named:
                self._add_root(report)
            return _Source(label, path, "eval", roots, report=report, episodes_file=path)
        if name.endswith(".json"):
            episodes = path.with_name(name.removesuffix(".json") + ".episodes.jsonl")
            if not named and not episodes.is_file():
                return None  # some other JSON file
            if named:
                self._add_root(episodes)
            return _Source(label, path, "eval", roots, report=path, episodes_file=episodes)
        if name.endswith(".jsonl") and name not in ("metrics.jsonl", "verl_metrics.jsonl"):
            if not named and not _looks_like_episodes(path):
                return None
            return _Source(label, path, "files", roots, episodes_file=path)
        return None

    def _add_root(self, path: Path) -> None:
        """A report named outright brings its sibling episodes file along (and the reverse)."""
        real = path.resolve()
        if real not in self.roots:
            self.roots.append(real)

    def _source_files(self, source: _Source) -> list[tuple[Path, str, int | None]]:
        """The episode files of a source, each with its kind and step."""
        files: list[tuple[Path, str, int | None]] = []
        roots = (*source.roots, *(r for r in self.roots if r not in source.roots))
        if source.backend in ("native", "verl"):
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
        return [(p, kind, step) for p, kind, step in files if p.is_file() and self._inside_of(p, roots)]

    # -- indexing -----------------------------------------------------------------------------
    def refresh(self, force: bool = False) -> bool:
        """Re-stat the sources and index what is new; at most every few seconds unless ``force``.
        Returns whether anything changed."""
        now = time.monotonic()
        if not force and now - self._last_refresh < REFRESH_EVERY:
            return False
        with self._lock:
            if not force and now - self._last_refresh < REFRESH_EVERY:
                return False
            sources = self._discover()
            wanted: dict[str, tuple[Path, str, str, int | None]] = {}
            for source in sources:
                for path, kind, step in self._source_files(source):
                    real = path.resolve()
                    wanted.setdefault(str(real), (real, source.id, kind, step))
            with self._writer():
                changed = self._sync(wanted)
            # another viewer process may have indexed what this one's caches were built without
            data_version = self._db.execute("PRAGMA data_version").fetchone()[0]
            changed = changed or data_version != self._data_version
            self._data_version = data_version
            self._src = sources
            self._by_id = {s.id: s for s in sources}
            self._paths = {fid: Path(p) for fid, p in self._db.execute("SELECT id, path FROM files")}
            if changed:
                self._version += 1
                self._cache.clear()
                self._scans.clear()
            self._last_refresh = time.monotonic()
            return changed

    @contextlib.contextmanager
    def _writer(self) -> Iterator[None]:
        """Another viewer process indexing the same sources waits for this one (and then finds
        the files indexed) instead of indexing them a second time."""
        try:
            import fcntl
        except ImportError:  # not POSIX: one viewer at a time is on the user
            yield
            return
        with open(self.db_path.with_suffix(".lock"), "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _sync(self, wanted: dict[str, tuple[Path, str, str, int | None]]) -> bool:
        """Bring the index in line with the files ``wanted``; returns whether anything changed."""
        known = {
            row[1]: row
            for row in self._db.execute(
                "SELECT id, path, run_id, kind, step, size, mtime_ns, indexed_to, head, tail FROM files"
            )
        }
        changed = False
        for gone in known.keys() - wanted.keys():
            self._forget(known[gone][0])
            changed = True
        todo = []
        for key, (path, run_id, kind, step) in wanted.items():
            try:
                st = path.stat()
            except OSError:
                continue
            row = known.get(key)
            if row is not None and (row[2], row[3], row[4]) != (run_id, kind, step):
                # the same file under another run id (a run of the same name appeared)
                with self._db:
                    self._db.execute("BEGIN")
                    self._db.execute(
                        "UPDATE files SET run_id=?, kind=?, step=? WHERE id=?",
                        (run_id, kind, step, row[0]),
                    )
                    self._db.execute(
                        "UPDATE episodes SET run_id=?, kind=?, step=? WHERE file_id=?",
                        (run_id, kind, step, row[0]),
                    )
                changed = True
            if row is not None and row[5] == st.st_size and row[6] == st.st_mtime_ns:
                continue
            todo.append((path, st, row, run_id, kind, step))
        done_episodes = 0
        for i, (path, st, row, run_id, kind, step) in enumerate(todo):
            done_episodes += self._index_file(path, st, row, run_id, kind, step, i, len(todo), done_episodes)
            changed = True
            if self._progress:
                self._progress(i + 1, len(todo), done_episodes)
        return changed

    def _forget(self, file_id: int) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM episodes WHERE file_id=?", (file_id,))
            self._db.execute("DELETE FROM files WHERE id=?", (file_id,))

    @staticmethod
    def _probe(f: Any, end: int) -> tuple[bytes, bytes]:
        """Hashes of the file's first bytes and of the bytes just before ``end``."""
        f.seek(0)
        head = hashlib.sha1(f.read(min(PROBE, end))).digest()
        start = max(0, end - PROBE)
        f.seek(start)
        tail = hashlib.sha1(f.read(end - start)).digest()
        return head, tail

    def _index_file(
        self,
        path: Path,
        st: os.stat_result,
        row: tuple | None,
        run_id: str,
        kind: str,
        step: int | None,
        files_done: int,
        files_total: int,
        episodes_before: int,
    ) -> int:
        """Index ``path`` from where the index stopped (or from its start if it was rewritten);
        returns how many episodes were added."""
        added = 0
        with path.open("rb") as f:
            start = 0
            if row is not None:
                file_id, indexed_to = row[0], row[7]
                if st.st_size >= indexed_to and self._probe(f, indexed_to) == (row[8], row[9]):
                    start = indexed_to
                else:
                    with self._db:
                        self._db.execute("BEGIN")
                        self._db.execute("DELETE FROM episodes WHERE file_id=?", (file_id,))
            else:
                with self._db:
                    self._db.execute("BEGIN")
                    cur = self._db.execute(
                        "INSERT INTO files (path, run_id, kind, step, size, mtime_ns, indexed_to) "
                        "VALUES (?, ?, ?, ?, -1, -1, 0)",
                        (str(path), run_id, kind, step),
                    )
                file_id = cur.lastrowid
            f.seek(start)
            offset = start
            batch: list[tuple] = []

            def flush(final: bool) -> None:
                # rows and how far the file is indexed move together: a crash never duplicates rows
                head, tail = self._probe(f, offset)
                f.seek(offset)
                with self._db:
                    self._db.execute("BEGIN")
                    self._db.executemany(
                        f"INSERT INTO episodes ({_COLUMNS.removeprefix('id, ')}) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        batch,
                    )
                    self._db.execute(
                        "UPDATE files SET size=?, mtime_ns=?, indexed_to=?, head=?, tail=? WHERE id=?",
                        (
                            st.st_size if final else -1,
                            st.st_mtime_ns if final else -1,
                            offset,
                            head,
                            tail,
                            file_id,
                        ),
                    )
                batch.clear()

            for line in f:
                complete = line.endswith(b"\n")
                fields = _parse(line) if line.strip() else None
                if not complete and fields is None:
                    break  # a torn last line: a writer is midway through it; read it next time
                if fields is not None:
                    batch.append((run_id, file_id, offset, len(line), step, kind, *fields))
                    added += 1
                offset += len(line)
                if len(batch) >= BATCH:
                    flush(final=False)
                    if self._progress:
                        self._progress(files_done, files_total, episodes_before + added)
            flush(final=True)
        return added

    # -- runs ---------------------------------------------------------------------------------
    def _load_json(self, path: Path) -> Any:
        """A JSON (or YAML) file's content, cached by its size and mtime; {} when unreadable."""
        try:
            st = path.stat()
        except OSError:
            return {}
        stamp = (st.st_size, st.st_mtime_ns)
        hit = self._json_cache.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value: Any = {}
        if self._inside_of(path, self.roots):
            try:
                if path.suffix in (".yaml", ".yml"):
                    import yaml

                    value = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
                elif path.suffix == ".jsonl":
                    value = _read_jsonl(path)
                else:
                    value = json.loads(path.read_text(encoding="utf-8"))
            except Exception:  # unreadable or malformed (YAML raises its own errors): show none
                value = {}
        self._json_cache[path] = (stamp, value)
        return value

    def _config(self, run_dir: Path) -> dict[str, Any]:
        config = self._load_json(run_dir / "config.yaml")
        return config if isinstance(config, dict) else {}

    def _cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        with self._lock:
            hit = self._cache.get(key)
            if hit is None:
                hit = self._cache[key] = compute()
            return hit

    def _source(self, run_id: str) -> _Source:
        source = self._by_id.get(run_id)
        if source is None:
            raise KeyError(run_id)
        return source

    def runs(self) -> list[RunInfo]:
        """Every source, in the order found."""
        counts = self._cached(
            "counts", lambda: dict(self._db.execute("SELECT run_id, COUNT(*) FROM episodes GROUP BY run_id"))
        )
        envs = self._cached("envs", self._envs_by_run)
        steps = self._cached(
            "steps",
            lambda: dict(self._db.execute("SELECT run_id, MAX(step) FROM episodes GROUP BY run_id")),
        )
        return [self._info(s, counts.get(s.id, 0), envs.get(s.id, []), steps.get(s.id)) for s in self._src]

    def _envs_by_run(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for run_id, env in self._db.execute(
            "SELECT DISTINCT run_id, env FROM episodes WHERE env IS NOT NULL ORDER BY run_id, env"
        ):
            out.setdefault(run_id, []).append(env)
        return out

    def run(self, run_id: str) -> RunInfo:
        """One run by id; KeyError if there is none."""
        for info in self.runs():
            if info.id == run_id:
                return info
        raise KeyError(run_id)

    def _info(self, source: _Source, count: int, envs: list[str], max_step: int | None) -> RunInfo:
        config: dict[str, Any] = {}
        report: dict[str, Any] = {}
        successes: list[float] = []
        steps = None
        if source.backend in ("native", "verl"):
            config = self._config(source.path)
            loaded = self._load_json(source.path / "report.json")
            report = loaded if isinstance(loaded, dict) else {}
            rows = self.metrics(source.id)
            step_values = [s for r in rows if (s := _integer(r.get("step"))) is not None]
            steps = max(step_values) if step_values else max_step
            successes = [v for r in rows if (v := _number(r.get("success"))) is not None]
            if not successes:
                successes = [
                    v for p in report.get("validation") or [] if (v := _number(p.get("success"))) is not None
                ]
            if not envs and isinstance(config.get("envs"), list):
                envs = [str(e) for e in config["envs"]]
        elif source.report is not None:
            loaded = self._load_json(source.report)
            report = loaded if isinstance(loaded, dict) else {}
            overall = self._eval_success(report)
            successes = [overall] if overall is not None else []
        return RunInfo(
            id=source.id,
            name=source.name,
            path=source.path,
            backend=source.backend,
            envs=envs,
            steps=steps,
            best_success=max(successes) if successes else None,
            last_success=successes[-1] if successes else None,
            episodes=count,
            config=config,
            report=report,
        )

    @staticmethod
    def _eval_success(report: dict[str, Any]) -> float | None:
        """An eval report's success over all its envs, weighted by their scored episodes."""
        envs = report.get("envs")
        if not isinstance(envs, dict):
            return None
        num = den = 0.0
        for env in envs.values():
            if not isinstance(env, dict) or _number(env.get("success")) is None:
                continue
            n = float((env.get("episodes") or 0) - (env.get("errors") or 0)) or 1.0
            num += env["success"] * n
            den += n
        return num / den if den else None

    def metrics(self, run_id: str) -> list[dict[str, Any]]:
        """The run's ``metrics.jsonl`` rows (a verl run's ``verl_metrics.jsonl``, renamed to ours);
        a torn or bad line is skipped. [] for a source that is not a run."""
        source = self._source(run_id)
        if source.backend not in ("native", "verl"):
            return []
        path = source.path / "metrics.jsonl"
        if path.is_file():
            rows = self._load_json(path)
            return rows if isinstance(rows, list) else []
        path = source.path / "verl_metrics.jsonl"
        if path.is_file():
            rows = self._load_json(path)
            return [_verl_row(r) for r in rows] if isinstance(rows, list) else []
        return []

    def validation(self, run_id: str) -> list[dict[str, Any]]:
        """``report.json``'s validation points: ``{"step", "success", "label"}``."""
        info = self.run(run_id)
        points = []
        for p in info.report.get("validation") or []:
            if (
                isinstance(p, dict)
                and _integer(p.get("step")) is not None
                and _number(p.get("success")) is not None
            ):
                points.append({"step": p["step"], "success": float(p["success"]), "label": p.get("label")})
        return points

    def per_env_success(self, run_id: str) -> dict[str, list[tuple[int, float]]]:
        """Success rate of the run's training episodes per env and step, from the index."""

        def compute() -> dict[str, list[tuple[int, float]]]:
            out: dict[str, list[tuple[int, float]]] = {}
            for env, step, rate in self._db.execute(
                "SELECT env, step, AVG(success) FROM episodes WHERE run_id=? AND kind='train' "
                "AND step IS NOT NULL GROUP BY env, step ORDER BY env, step",
                (run_id,),
            ):
                out.setdefault(env, []).append((step, float(rate or 0.0)))
            return out

        return self._cached(("per_env", run_id), compute)

    def plots(self, run_id: str) -> list[str]:
        """Names of the images in the run's ``plots/`` folder that lie inside a root."""
        source = self._source(run_id)
        folder = source.path / "plots"
        if source.backend not in ("native", "verl") or not folder.is_dir():
            return []
        return sorted(
            p.name
            for p in folder.iterdir()
            if p.suffix.lower() in PLOT_SUFFIXES and p.is_file() and self.inside(p)
        )

    def plot_path(self, run_id: str, name: str) -> Path | None:
        """The plot's file if ``name`` is one of :meth:`plots` (a name, never a path), else None."""
        try:
            names = self.plots(run_id)
        except KeyError:
            return None
        if name not in names:
            return None
        path = (self._source(run_id).path / "plots" / name).resolve()
        return path if self.inside(path) and path.is_file() else None

    # -- episodes -----------------------------------------------------------------------------
    def _where(self, **filters: Any) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        columns = {
            "run": "run_id",
            "env": "env",
            "split": "split",
            "kind": "kind",
            "step": "step",
            "category": "category",
            "termination": "termination",
            "task_id": "task_id",
        }
        for name, column in columns.items():
            value = filters.get(name)
            if value is None or value == "":
                continue
            clauses.append(f"{column}=?")
            params.append(int(value) if name in ("step", "task_id") else str(value))
        success = filters.get("success")
        if isinstance(success, str):
            success = {"yes": True, "true": True, "1": True, "no": False, "false": False, "0": False}.get(
                success.lower()
            )
        if success is not None:
            clauses.append("success=?")
            params.append(int(bool(success)))
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _row(self, r: Sequence[Any]) -> dict[str, Any]:
        source = self._by_id.get(r[1])
        return {
            "id": r[0],
            "run_id": r[1],
            "run": source.name if source else r[1],
            "file_id": r[2],
            "offset": r[3],
            "length": r[4],
            "step": r[5],
            "kind": r[6],
            "env": r[7],
            "split": r[8],
            "category": r[9],
            "task_id": r[10],
            "policy": r[11],
            "seed": r[12],
            "sample": r[13],
            "success": None if r[14] is None else bool(r[14]),
            "termination": r[15],
            "return": r[16],
            "num_turns": r[17],
            "has_tokens": bool(r[18]),
            "path": str(self._paths.get(r[2], "")),
        }

    def query(
        self,
        run: str | None = None,
        env: str | None = None,
        split: str | None = None,
        kind: str | None = None,
        step: int | None = None,
        category: str | None = None,
        success: bool | str | None = None,
        termination: str | None = None,
        task_id: int | None = None,
        text: str | None = None,
        sort: str = "step",
        page: int = 1,
        per_page: int = 50,
    ) -> Page:
        """One page of the episodes passing the filters, in ``sort`` order (see ``SORTS``).

        ``text`` (case-insensitive for ASCII) is looked for in the raw JSON lines of the rows that
        pass the other filters, read from their files in order until the page is full or the
        request's time budget is spent; its progress is kept for the next page and the next try.
        """
        if sort not in SORTS:
            raise ValueError(f"unknown sort {sort!r} (one of: {', '.join(SORTS)})")
        page, per_page = max(1, int(page)), max(1, min(int(per_page), 500))
        where, params = self._where(
            run=run,
            env=env,
            split=split,
            kind=kind,
            step=step,
            category=category,
            success=success,
            termination=termination,
            task_id=task_id,
        )
        order = SORTS[sort]
        with self._lock:
            if text:
                return self._search(where, params, order, text, page, per_page)
            total = self._cached(
                ("count", where, tuple(params)),
                lambda: self._db.execute(f"SELECT COUNT(*) FROM episodes{where}", params).fetchone()[0],
            )
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM episodes{where} ORDER BY {order} LIMIT ? OFFSET ?",
                [*params, per_page, (page - 1) * per_page],
            ).fetchall()
            return Page([self._row(r) for r in rows], total, page, per_page)

    def _search(self, where: str, params: list[Any], order: str, text: str, page: int, per_page: int) -> Page:
        needle = text.lower()
        # the line holds the text JSON-escaped (quotes, backslashes, control characters)
        needles = list(
            dict.fromkeys([needle.encode(), json.dumps(needle, ensure_ascii=False)[1:-1].encode()])
        )
        key = (where, tuple(params), order, needle)
        scan = self._scans.get(key)
        if scan is None:
            scan = self._scans[key] = _Scan()
            while len(self._scans) > 32:
                self._scans.popitem(last=False)
        self._scans.move_to_end(key)
        want = page * per_page + 1  # one more than the page: is there a next page?
        deadline = time.monotonic() + self.search_budget_s
        chunk = 256  # small first: a common word fills the first page from the first rows
        fds: dict[int, int] = {}
        try:
            while len(scan.matches) < want and not scan.done and time.monotonic() < deadline:
                rows = self._db.execute(
                    f"SELECT id, file_id, offset, length FROM episodes{where} ORDER BY {order} "
                    "LIMIT ? OFFSET ?",
                    [*params, chunk, scan.scanned],
                ).fetchall()
                if not rows:
                    scan.done = True
                    break
                scan.matches.extend(self._scan_rows(rows, needles, fds))
                scan.scanned += len(rows)
                if len(rows) < chunk:
                    scan.done = True
                chunk = min(chunk * 4, 4096)
        finally:
            for fd in fds.values():
                os.close(fd)
        ids = scan.matches[(page - 1) * per_page : page * per_page]
        rows = []
        if ids:
            marks = ",".join("?" * len(ids))
            found = {
                r[0]: r
                for r in self._db.execute(f"SELECT {_COLUMNS} FROM episodes WHERE id IN ({marks})", ids)
            }
            rows = [self._row(found[i]) for i in ids if i in found]
        candidates = self._cached(
            ("count", where, tuple(params)),
            lambda: self._db.execute(f"SELECT COUNT(*) FROM episodes{where}", params).fetchone()[0],
        )
        return Page(
            rows,
            None,
            page,
            per_page,
            scanned=scan.scanned,
            matched=len(scan.matches),
            complete=scan.done,
            candidates=candidates,
            more=len(scan.matches) > page * per_page or not scan.done,
        )

    def _scan_rows(self, rows: list[tuple], needles: list[bytes], fds: dict[int, int]) -> list[int]:
        """Ids of the rows whose line holds a needle. Rows next to each other in one file are read
        (and searched) as one range: one read and one search for a stretch with no match."""
        hits: list[int] = []
        i = 0
        while i < len(rows):
            file_id, start = rows[i][1], rows[i][2]
            j, end = i + 1, rows[i][2] + rows[i][3]
            while j < len(rows) and rows[j][1] == file_id and rows[j][2] == end and end - start < 8 << 20:
                end += rows[j][3]
                j += 1
            fd = self._fd(file_id, fds)
            if fd is not None:
                data = os.pread(fd, end - start, start).lower()
                if any(n in data for n in needles):
                    for r in rows[i:j]:
                        part = data[r[2] - start : r[2] - start + r[3]]
                        if any(n in part for n in needles):
                            hits.append(r[0])
            i = j
        return hits

    def _fd(self, file_id: int, fds: dict[int, int]) -> int | None:
        if file_id not in fds:
            path = self._paths.get(file_id)
            if path is None or not self.inside(path):
                return None
            try:
                fds[file_id] = os.open(path, os.O_RDONLY)
            except OSError:
                return None
        return fds[file_id]

    def meta(self, eid: int) -> dict[str, Any]:
        """The index row of one episode; KeyError if there is none."""
        with self._lock:
            r = self._db.execute(f"SELECT {_COLUMNS} FROM episodes WHERE id=?", (int(eid),)).fetchone()
            if r is None:
                raise KeyError(eid)
            return self._row(r)

    def episode(self, eid: int) -> tuple[dict[str, Any], Episode]:
        """One episode's index row and the episode, read from its line; KeyError if it is gone."""
        meta = self.meta(eid)
        path = Path(meta["path"])
        if not self.inside(path):
            raise KeyError(eid)
        try:
            with path.open("rb") as f:
                f.seek(meta["offset"])
                line = f.read(meta["length"])
            episode = Episode.from_dict(json.loads(line))
        except (OSError, ValueError) as exc:
            raise KeyError(eid) from exc
        return meta, episode

    def raw(self, eid: int) -> bytes:
        """One episode's line as stored (for a download link)."""
        meta = self.meta(eid)
        path = Path(meta["path"])
        if not self.inside(path):
            raise KeyError(eid)
        with path.open("rb") as f:
            f.seek(meta["offset"])
            return f.read(meta["length"])

    def siblings(self, eid: int, limit: int = 500) -> list[dict[str, Any]]:
        """Episodes of the same env and task as ``eid`` (other samples, steps and runs)."""
        meta = self.meta(eid)
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM episodes WHERE env=? AND task_id IS ? AND id<>? "
                "ORDER BY run_id, step IS NULL, step, sample, id LIMIT ?",
                (meta["env"], meta["task_id"], meta["id"], limit),
            ).fetchall()
            return [self._row(r) for r in rows]

    def tokenizer_path(self, eid: int) -> Path | None:
        """``<run>/model/tokenizer.json`` of the episode's run, if it has one."""
        meta = self.meta(eid)
        source = self._by_id.get(meta["run_id"])
        if source is None or source.backend not in ("native", "verl"):
            return None
        path = source.path / "model" / "tokenizer.json"
        return path if path.is_file() and self.inside(path) else None

    def filter_values(self, run: str | None = None) -> dict[str, list[Any]]:
        """The values each filter of the episodes form can take (within ``run`` if given)."""

        def compute() -> dict[str, list[Any]]:
            where, params = ("WHERE run_id=?", [run]) if run else ("", [])
            out: dict[str, list[Any]] = {}
            for name, column in (
                ("env", "env"),
                ("split", "split"),
                ("category", "category"),
                ("termination", "termination"),
                ("step", "step"),
                ("kind", "kind"),
            ):
                cond = f"{where} AND {column} IS NOT NULL" if where else f"WHERE {column} IS NOT NULL"
                out[name] = [
                    v
                    for (v,) in self._db.execute(
                        f"SELECT DISTINCT {column} FROM episodes {cond} ORDER BY {column}", params
                    )
                ]
            return out

        return self._cached(("values", run), compute)

    @property
    def version(self) -> int:
        """Bumped whenever the index changes."""
        return self._version
