"""The records the index hands out and passes between its modules: sources, run summaries, pages."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Source:
    """One source found under the roots: a run directory, an eval report or an episodes file."""

    name: str
    path: Path  # the run dir, or the report / episodes file
    backend: str  # native | verl | eval | files
    roots: tuple[Path, ...]
    report: Path | None = None
    episodes_file: Path | None = None
    id: str = ""

    @property
    def is_run(self) -> bool:
        """Whether it is a training run directory (metrics, plots, config) rather than a file."""
        return self.backend in ("native", "verl")


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
