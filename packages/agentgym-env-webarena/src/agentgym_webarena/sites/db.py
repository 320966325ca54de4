"""The per-session copies of the pristine database, and connections to them.

``Databases`` keeps the pristine file (built once per process, written into a private temp dir per
instance) and one copy per session token. A copy is a plain file copy (the file is a few hundred KB),
swapped in with ``os.replace`` so a request still holding the old file finishes on the old inode
instead of reading a half-copied one. Connections use an in-memory rollback journal for the same
reason: a stale ``-journal`` file next to a freshly copied database would be replayed onto it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from pathlib import Path

from .pristine import pristine_bytes


def connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection to one site database: rows as ``sqlite3.Row``, foreign keys on, journal in memory."""
    db = sqlite3.connect(path, check_same_thread=False, timeout=5.0)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA journal_mode=MEMORY")
    db.execute("PRAGMA synchronous=OFF")
    return db


class Databases:
    """The pristine database and one copy of it per session token (thread-safe).

    ``open(token)``/``reset(token)`` give the token a fresh copy (re-copying over the one it had, which
    also signs every user out and empties every cart), ``drop`` deletes it, ``connect(token)`` opens a connection to it. Tokens are arbitrary strings; files are
    named by a counter, never by the token. ``DEFAULT`` ("default") is the copy the web apps use for
    requests without a session header; they open it on first use.
    """

    DEFAULT = "default"

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        if directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="agentgym-sites-"))
            # Remove our temp dir when this object goes away or at interpreter exit, whichever is first.
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.directory, True)
        else:
            self.directory = Path(directory)
            self.directory.mkdir(parents=True, exist_ok=True)
            self._cleanup = None
        self.pristine = self.directory / "pristine.sqlite"
        self.pristine.write_bytes(pristine_bytes())
        self._paths: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._names = itertools.count(1)

    def _fresh_copy(self, token: str) -> Path:
        """Copy the pristine file over ``token``'s (a new file the first time); the caller holds the lock."""
        path = self._paths.get(token)
        if path is None:
            path = self.directory / f"session-{next(self._names)}.sqlite"
        tmp = path.with_name(path.name + ".tmp")
        shutil.copyfile(self.pristine, tmp)
        os.replace(tmp, path)
        self._paths[token] = path
        return path

    def open(self, token: str) -> Path:
        """A fresh copy of the pristine database for ``token`` (replacing its current one, if any)."""
        with self._lock:
            return self._fresh_copy(token)

    def reset(self, token: str) -> Path:
        """Restore ``token``'s database to the pristine state (the same as ``open``: a token seen for
        the first time gets its copy here, so an env can simply reset at every episode start)."""
        return self.open(token)

    def drop(self, token: str) -> None:
        """Delete ``token``'s database (no error if it has none)."""
        with self._lock:
            path = self._paths.pop(token, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def path(self, token: str) -> Path | None:
        """The file of ``token``'s database, or None if it is not open."""
        with self._lock:
            return self._paths.get(token)

    def tokens(self) -> list[str]:
        """The open tokens."""
        with self._lock:
            return list(self._paths)

    def __contains__(self, token: object) -> bool:
        with self._lock:
            return token in self._paths

    def connect(self, token: str, *, create: bool = False) -> sqlite3.Connection:
        """A new connection to ``token``'s database (opened first when ``create``; else ``KeyError`` if
        unknown). The caller closes it."""
        with self._lock:
            path = self._paths.get(token)
        if path is None:
            if not create:
                raise KeyError(token)
            with self._lock:
                # Another thread may have opened it meanwhile; only the first one copies.
                path = self._paths.get(token) or self._fresh_copy(token)
        return connect(path)

    def close(self) -> None:
        """Drop every copy, and delete the directory if this object created it."""
        for token in self.tokens():
            self.drop(token)
        if self._cleanup is not None:
            self._cleanup()
