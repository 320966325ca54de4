"""Reads of episodes: the filtered, sorted, paged query and its text search, one episode, its siblings."""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.trajectory import Episode
from agentgym_viewer.index.models import Page
from agentgym_viewer.index.store import COLUMNS, Store

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
#: filter name -> column, for the filters matched by equality
_FILTER_COLUMNS = {
    "run": "run_id",
    "env": "env",
    "split": "split",
    "kind": "kind",
    "step": "step",
    "category": "category",
    "termination": "termination",
    "task_id": "task_id",
}
_YES_NO = {"yes": True, "true": True, "1": True, "no": False, "false": False, "0": False}
#: text searches whose progress is kept (least recently used dropped first)
_KEPT_SCANS = 32


def where(filters: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause (empty without filters) and its parameters for the set ``filters``."""
    clauses: list[str] = []
    params: list[Any] = []
    for name, column in _FILTER_COLUMNS.items():
        value = filters.get(name)
        if value is None or value == "":
            continue
        clauses.append(f"{column}=?")
        params.append(int(value) if name in ("step", "task_id") else str(value))
    success = filters.get("success")
    if isinstance(success, str):
        success = _YES_NO.get(success.lower())
    if success is not None:
        clauses.append("success=?")
        params.append(int(bool(success)))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


@dataclass
class _Scan:
    """A text search's progress, kept so the next page (or "continue") resumes where it stopped."""

    scanned: int = 0
    matches: list[int] = field(default_factory=list)
    done: bool = False


def _needles(needle: str) -> list[bytes]:
    # the line holds the text JSON-escaped (quotes, backslashes, control characters)
    return list(dict.fromkeys([needle.encode(), json.dumps(needle, ensure_ascii=False)[1:-1].encode()]))


class Episodes:
    """The episodes pages' reads: index rows as dicts, and episodes read from their lines by offset."""

    def __init__(self, store: Store, search_budget_s: float = SEARCH_BUDGET_S):
        self._store = store
        self.search_budget_s = search_budget_s

    def row(self, r: Sequence[Any]) -> dict[str, Any]:
        """An ``episodes`` row (its ``COLUMNS``) as the pages use it."""
        source = self._store.by_id.get(r[1])
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
            "path": str(self._store.paths.get(r[2], "")),
        }

    def query(
        self, filters: Mapping[str, Any], text: str | None, sort: str, page: int, per_page: int
    ) -> Page:
        """One page of the episodes passing ``filters`` (see :func:`where`); see ``Index.query``."""
        if sort not in SORTS:
            raise ValueError(f"unknown sort {sort!r} (one of: {', '.join(SORTS)})")
        page, per_page = max(1, int(page)), max(1, min(int(per_page), 500))
        clause, params = where(filters)
        order = SORTS[sort]
        with self._store.lock:
            if text:
                return self._search(clause, params, order, text, page, per_page)
            total = self._count(clause, params)
            rows = self._store.db.execute(
                f"SELECT {COLUMNS} FROM episodes{clause} ORDER BY {order} LIMIT ? OFFSET ?",
                [*params, per_page, (page - 1) * per_page],
            ).fetchall()
            return Page([self.row(r) for r in rows], total, page, per_page)

    def _count(self, clause: str, params: list[Any]) -> int:
        db = self._store.db
        return self._store.cached(
            ("count", clause, tuple(params)),
            lambda: db.execute(f"SELECT COUNT(*) FROM episodes{clause}", params).fetchone()[0],
        )

    # -- text search --------------------------------------------------------------------------
    def _search(
        self, clause: str, params: list[Any], order: str, text: str, page: int, per_page: int
    ) -> Page:
        needle = text.lower()
        scan = self._scan_state((clause, tuple(params), order, needle))
        # one more than the page: is there a next page?
        self._advance(scan, clause, params, order, _needles(needle), want=page * per_page + 1)
        ids = scan.matches[(page - 1) * per_page : page * per_page]
        rows = []
        if ids:
            marks = ",".join("?" * len(ids))
            found = {
                r[0]: r
                for r in self._store.db.execute(f"SELECT {COLUMNS} FROM episodes WHERE id IN ({marks})", ids)
            }
            rows = [self.row(found[i]) for i in ids if i in found]
        return Page(
            rows,
            None,
            page,
            per_page,
            scanned=scan.scanned,
            matched=len(scan.matches),
            complete=scan.done,
            candidates=self._count(clause, params),
            more=len(scan.matches) > page * per_page or not scan.done,
        )

    def _scan_state(self, key: tuple) -> _Scan:
        # kept with the index's cached reads: rows added or removed make the progress stale
        scans: OrderedDict[tuple, _Scan] = self._store.cached("scans", OrderedDict)
        scan = scans.get(key)
        if scan is None:
            scan = scans[key] = _Scan()
            while len(scans) > _KEPT_SCANS:
                scans.popitem(last=False)
        scans.move_to_end(key)
        return scan

    def _advance(
        self, scan: _Scan, clause: str, params: list[Any], order: str, needles: list[bytes], want: int
    ) -> None:
        """Scan on until ``want`` matches are found, every row is read or the time budget is spent."""
        deadline = time.monotonic() + self.search_budget_s
        chunk = 256  # small first: a common word fills the first page from the first rows
        fds: dict[int, int] = {}
        try:
            while len(scan.matches) < want and not scan.done and time.monotonic() < deadline:
                rows = self._store.db.execute(
                    f"SELECT id, file_id, offset, length FROM episodes{clause} ORDER BY {order} "
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
            path = self._store.paths.get(file_id)
            if path is None or not self._store.scanner.inside(path):
                return None
            try:
                fds[file_id] = os.open(path, os.O_RDONLY)
            except OSError:
                return None
        return fds[file_id]

    # -- one episode --------------------------------------------------------------------------
    def meta(self, eid: int) -> dict[str, Any]:
        """The index row of one episode; KeyError if there is none."""
        with self._store.lock:
            r = self._store.db.execute(f"SELECT {COLUMNS} FROM episodes WHERE id=?", (int(eid),)).fetchone()
            if r is None:
                raise KeyError(eid)
            return self.row(r)

    def line(self, eid: int) -> tuple[dict[str, Any], bytes]:
        """One episode's index row and its line as stored; KeyError if it lies outside the roots,
        OSError if it cannot be read."""
        meta = self.meta(eid)
        path = Path(meta["path"])
        if not self._store.scanner.inside(path):
            raise KeyError(eid)
        with path.open("rb") as f:
            f.seek(meta["offset"])
            return meta, f.read(meta["length"])

    def episode(self, eid: int) -> tuple[dict[str, Any], Episode]:
        """One episode's index row and the episode, read from its line; KeyError if it is gone."""
        try:
            meta, line = self.line(eid)
            episode = Episode.from_dict(json.loads(line))
        except (OSError, ValueError) as exc:
            raise KeyError(eid) from exc
        return meta, episode

    def siblings(self, eid: int, limit: int = 500) -> list[dict[str, Any]]:
        """Episodes of the same env and task as ``eid`` (other samples, steps and runs)."""
        meta = self.meta(eid)
        with self._store.lock:
            rows = self._store.db.execute(
                f"SELECT {COLUMNS} FROM episodes WHERE env=? AND task_id IS ? AND id<>? "
                "ORDER BY run_id, step IS NULL, step, sample, id LIMIT ?",
                (meta["env"], meta["task_id"], meta["id"], limit),
            ).fetchall()
            return [self.row(r) for r in rows]

    def filter_values(self, run: str | None = None) -> dict[str, list[Any]]:
        """The values each filter of the episodes form can take (within ``run`` if given)."""

        def compute() -> dict[str, list[Any]]:
            clause, params = ("WHERE run_id=?", [run]) if run else ("", [])
            out: dict[str, list[Any]] = {}
            for column in ("env", "split", "category", "termination", "step", "kind"):
                cond = f"{clause} AND {column} IS NOT NULL" if clause else f"WHERE {column} IS NOT NULL"
                out[column] = [
                    v
                    for (v,) in self._store.db.execute(
                        f"SELECT DISTINCT {column} FROM episodes {cond} ORDER BY {column}", params
                    )
                ]
            return out

        return self._store.cached(("values", run), compute)
