"""``Index``: the one object the viewer holds, composing the scanner, the store and the reads."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentgym.trajectory import Episode
from agentgym_viewer.index.models import Page, RunInfo
from agentgym_viewer.index.query import SEARCH_BUDGET_S, Episodes
from agentgym_viewer.index.runs import Runs
from agentgym_viewer.index.scan import Scanner
from agentgym_viewer.index.store import Store, cache_dir


class Index:
    """The episodes of ``sources`` in an on-disk SQLite index (see the package docstring).

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
        key = hashlib.sha1("\0".join(str(p) for p in self.sources).encode()).hexdigest()[:16]
        directory = Path(cache) if cache is not None else cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        self.db_path = directory / f"index-{key}.sqlite3"
        self._scanner = Scanner(self.sources)
        self._store = Store(self.db_path, self._scanner, progress)
        self._runs = Runs(self._store)
        self._episodes = Episodes(self._store, search_budget_s)
        self.refresh(force=True)

    @property
    def roots(self) -> list[Path]:
        """The folders and files nothing outside of is read: the sources, and the sibling of a
        report or episodes file named outright."""
        return self._scanner.roots

    @property
    def search_budget_s(self) -> float:
        """How long a text search scans per request before the page offers to continue."""
        return self._episodes.search_budget_s

    @search_budget_s.setter
    def search_budget_s(self, value: float) -> None:
        self._episodes.search_budget_s = value

    @property
    def version(self) -> int:
        """Bumped whenever the index changes."""
        return self._store.version

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def inside(self, path: Path) -> bool:
        """Whether ``path`` (resolved, symlinks followed) lies inside one of the roots."""
        return self._scanner.inside(path)

    def refresh(self, force: bool = False) -> bool:
        """Re-stat the sources and index what is new; at most every few seconds unless ``force``.
        Returns whether anything changed."""
        return self._store.refresh(force)

    # -- runs ---------------------------------------------------------------------------------
    def runs(self) -> list[RunInfo]:
        """Every source, in the order found."""
        return self._runs.runs()

    def run(self, run_id: str) -> RunInfo:
        """One run by id; KeyError if there is none."""
        return self._runs.run(run_id)

    def metrics(self, run_id: str) -> list[dict[str, Any]]:
        """The run's ``metrics.jsonl`` rows (a verl run's ``verl_metrics.jsonl``, renamed to ours);
        a torn or bad line is skipped. [] for a source that is not a run."""
        return self._runs.metrics(run_id)

    def validation(self, run_id: str) -> list[dict[str, Any]]:
        """``report.json``'s validation points: ``{"step", "success", "label"}``."""
        return self._runs.validation(run_id)

    def per_env_success(self, run_id: str) -> dict[str, list[tuple[int, float]]]:
        """Success rate of the run's training episodes per env and step, from the index."""
        return self._runs.per_env_success(run_id)

    def plots(self, run_id: str) -> list[str]:
        """Names of the images in the run's ``plots/`` folder that lie inside a root."""
        return self._runs.plots(run_id)

    def plot_path(self, run_id: str, name: str) -> Path | None:
        """The plot's file if ``name`` is one of :meth:`plots` (a name, never a path), else None."""
        return self._runs.plot_path(run_id, name)

    # -- episodes -----------------------------------------------------------------------------
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
        filters = {
            "run": run,
            "env": env,
            "split": split,
            "kind": kind,
            "step": step,
            "category": category,
            "success": success,
            "termination": termination,
            "task_id": task_id,
        }
        return self._episodes.query(filters, text, sort, page, per_page)

    def meta(self, eid: int) -> dict[str, Any]:
        """The index row of one episode; KeyError if there is none."""
        return self._episodes.meta(eid)

    def episode(self, eid: int) -> tuple[dict[str, Any], Episode]:
        """One episode's index row and the episode, read from its line; KeyError if it is gone."""
        return self._episodes.episode(eid)

    def raw(self, eid: int) -> bytes:
        """One episode's line as stored (for a download link)."""
        return self._episodes.line(eid)[1]

    def siblings(self, eid: int, limit: int = 500) -> list[dict[str, Any]]:
        """Episodes of the same env and task as ``eid`` (other samples, steps and runs)."""
        return self._episodes.siblings(eid, limit)

    def tokenizer_path(self, eid: int) -> Path | None:
        """``<run>/model/tokenizer.json`` of the episode's run, if it has one."""
        return self._runs.tokenizer_path(self.meta(eid)["run_id"])

    def filter_values(self, run: str | None = None) -> dict[str, list[Any]]:
        """The values each filter of the episodes form can take (within ``run`` if given)."""
        return self._episodes.filter_values(run)
