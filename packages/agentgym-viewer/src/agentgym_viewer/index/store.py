"""The index's SQLite database: its schema, and bringing its rows in line with the episode files."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from agentgym_viewer.index.models import Source
from agentgym_viewer.index.scan import Scanner, Wanted, parse_episode

SCHEMA_VERSION = 1
#: ``refresh()`` re-stats the sources at most this often (seconds) unless forced.
REFRESH_EVERY = 3.0
#: rows inserted per transaction while indexing
BATCH = 2000
#: bytes hashed at the start of a file and before where indexing stopped, to tell an appended file
#: (continue from where we stopped) from a rewritten one (index it again)
PROBE = 4096

COLUMNS = (
    "id, run_id, file_id, offset, length, step, kind, env, split, category, task_id, policy, seed, "
    "sample, success, termination, ret, num_turns, has_tokens"
)
_INSERT = (
    f"INSERT INTO episodes ({COLUMNS.removeprefix('id, ')}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
    """Where the index databases live: ``$AGENTGYM_VIEWER_CACHE``, else ``~/.cache/agentgym/viewer``."""
    return Path(os.environ.get("AGENTGYM_VIEWER_CACHE") or Path.home() / ".cache" / "agentgym" / "viewer")


def connect(path: Path) -> sqlite3.Connection:
    """The database at ``path`` with the current schema, shareable between threads."""
    db = sqlite3.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        # an index written by another version of the viewer: it is only a cache, start over
        db.executescript("DROP TABLE IF EXISTS episodes; DROP TABLE IF EXISTS files;")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    db.executescript(_DDL)
    return db


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    # the connection is in autocommit mode: without BEGIN each statement would commit on its own
    with db:
        db.execute("BEGIN")
        yield db


@contextlib.contextmanager
def writer_lock(db_path: Path) -> Iterator[None]:
    """Another viewer process indexing the same sources waits for this one (and then finds
    the files indexed) instead of indexing them a second time."""
    try:
        import fcntl
    except ImportError:  # not POSIX: one viewer at a time is on the user
        yield
        return
    with open(db_path.with_suffix(".lock"), "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def probe(f: IO[bytes], end: int) -> tuple[bytes, bytes]:
    """Hashes of the file's first bytes and of the bytes just before ``end``."""
    f.seek(0)
    head = hashlib.sha1(f.read(min(PROBE, end))).digest()
    start = max(0, end - PROBE)
    f.seek(start)
    tail = hashlib.sha1(f.read(end - start)).digest()
    return head, tail


class Store:
    """The rows of the scanner's episode files in one SQLite database, with what reads need beside
    them: the sources found at the last refresh, file paths by id, and a cache of derived reads that
    is dropped whenever the rows change. One connection, used under ``lock``.

    ``progress(files_done, files_total, episodes)`` is told how indexing goes.
    """

    def __init__(
        self,
        db_path: Path,
        scanner: Scanner,
        progress: Callable[[int, int, int], None] | None = None,
    ):
        self.db_path = db_path
        self.scanner = scanner
        self.lock = threading.RLock()
        self.db = connect(db_path)
        self.version = 1
        self.sources: list[Source] = []
        self.by_id: dict[str, Source] = {}
        self.paths: dict[int, Path] = {}
        self._progress = progress
        self._memo: dict[Any, Any] = {}
        self._data_version: int | None = None
        self._last_refresh = -math.inf

    def close(self) -> None:
        with self.lock:
            self.db.close()

    def source(self, run_id: str) -> Source:
        """The source with this id; KeyError if there is none."""
        source = self.by_id.get(run_id)
        if source is None:
            raise KeyError(run_id)
        return source

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``'s value, kept until the index changes."""
        with self.lock:
            hit = self._memo.get(key)
            if hit is None:
                hit = self._memo[key] = compute()
            return hit

    def refresh(self, force: bool = False) -> bool:
        """Re-stat the sources and index what is new; at most every few seconds unless ``force``.
        Returns whether anything changed."""
        now = time.monotonic()
        if not force and now - self._last_refresh < REFRESH_EVERY:
            return False
        with self.lock:
            if not force and now - self._last_refresh < REFRESH_EVERY:
                return False
            sources = self.scanner.discover()
            wanted = self.scanner.wanted(sources)
            with writer_lock(self.db_path):
                changed = self._sync(wanted)
            # another viewer process may have indexed what this one's caches were built without
            data_version = self.db.execute("PRAGMA data_version").fetchone()[0]
            changed = changed or data_version != self._data_version
            self._data_version = data_version
            self.sources = sources
            self.by_id = {s.id: s for s in sources}
            self.paths = {fid: Path(p) for fid, p in self.db.execute("SELECT id, path FROM files")}
            if changed:
                self.version += 1
                self._memo.clear()
            self._last_refresh = time.monotonic()
            return changed

    # -- syncing ------------------------------------------------------------------------------
    def _sync(self, wanted: dict[str, Wanted]) -> bool:
        """Bring the index in line with the files ``wanted``; returns whether anything changed."""
        known = {
            row[1]: row
            for row in self.db.execute(
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
                self._retag(row[0], run_id, kind, step)
                changed = True
            if row is not None and row[5] == st.st_size and row[6] == st.st_mtime_ns:
                continue
            todo.append((path, st, row, run_id, kind, step))
        done = 0
        for i, (path, st, row, run_id, kind, step) in enumerate(todo):
            done += self._index_file(path, st, row, run_id, kind, step, self._reporter(i, len(todo), done))
            changed = True
            if self._progress:
                self._progress(i + 1, len(todo), done)
        return changed

    def _reporter(self, files_done: int, files_total: int, before: int) -> Callable[[int], None] | None:
        """What tells ``progress`` how a file being indexed goes, counting the episodes ``before`` it."""
        progress = self._progress
        if progress is None:
            return None
        return lambda added: progress(files_done, files_total, before + added)

    def _retag(self, file_id: int, run_id: str, kind: str, step: int | None) -> None:
        with transaction(self.db) as db:
            db.execute("UPDATE files SET run_id=?, kind=?, step=? WHERE id=?", (run_id, kind, step, file_id))
            db.execute(
                "UPDATE episodes SET run_id=?, kind=?, step=? WHERE file_id=?", (run_id, kind, step, file_id)
            )

    def _forget(self, file_id: int) -> None:
        with transaction(self.db) as db:
            db.execute("DELETE FROM episodes WHERE file_id=?", (file_id,))
            db.execute("DELETE FROM files WHERE id=?", (file_id,))

    def _index_file(
        self,
        path: Path,
        st: os.stat_result,
        row: tuple | None,
        run_id: str,
        kind: str,
        step: int | None,
        report: Callable[[int], None] | None,
    ) -> int:
        """Index ``path`` from where the index stopped (or from its start if it was rewritten);
        returns how many episodes were added. ``report(added)`` is called after each batch."""
        added = 0
        with path.open("rb") as f:
            file_id, offset = self._resume(f, path, st, row, run_id, kind, step)
            f.seek(offset)
            batch: list[tuple] = []
            for line in f:
                complete = line.endswith(b"\n")
                fields = parse_episode(line) if line.strip() else None
                if not complete and fields is None:
                    break  # a torn last line: a writer is midway through it; read it next time
                if fields is not None:
                    batch.append((run_id, file_id, offset, len(line), step, kind, *fields))
                    added += 1
                offset += len(line)
                if len(batch) >= BATCH:
                    self._flush(f, file_id, offset, batch, None)
                    if report:
                        report(added)
            self._flush(f, file_id, offset, batch, st)
        return added

    def _resume(
        self,
        f: IO[bytes],
        path: Path,
        st: os.stat_result,
        row: tuple | None,
        run_id: str,
        kind: str,
        step: int | None,
    ) -> tuple[int, int]:
        """The file's id and the offset to index it from: where the index stopped if the file only
        grew since, else 0 (its rows dropped, or a new ``files`` row added)."""
        if row is None:
            with transaction(self.db) as db:
                cur = db.execute(
                    "INSERT INTO files (path, run_id, kind, step, size, mtime_ns, indexed_to) "
                    "VALUES (?, ?, ?, ?, -1, -1, 0)",
                    (str(path), run_id, kind, step),
                )
            return cur.lastrowid, 0
        file_id, indexed_to = row[0], row[7]
        if st.st_size >= indexed_to and probe(f, indexed_to) == (row[8], row[9]):
            return file_id, indexed_to
        with transaction(self.db) as db:
            db.execute("DELETE FROM episodes WHERE file_id=?", (file_id,))
        return file_id, 0

    def _flush(
        self, f: IO[bytes], file_id: int, offset: int, batch: list[tuple], st: os.stat_result | None
    ) -> None:
        """Insert ``batch`` and record the file indexed up to ``offset``; with ``st`` (the last
        flush) its size and mtime too, so an unchanged file is skipped next time."""
        # rows and how far the file is indexed move together: a crash never duplicates rows
        head, tail = probe(f, offset)
        f.seek(offset)
        with transaction(self.db) as db:
            db.executemany(_INSERT, batch)
            db.execute(
                "UPDATE files SET size=?, mtime_ns=?, indexed_to=?, head=?, tail=? WHERE id=?",
                (
                    st.st_size if st is not None else -1,
                    st.st_mtime_ns if st is not None else -1,
                    offset,
                    head,
                    tail,
                    file_id,
                ),
            )
        batch.clear()
