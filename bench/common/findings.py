"""What a benchmark found: printed for a reader, and written as JSON for ``bench.all``.

A benchmark prints its result (one JSON object) and its ratio lines (``ratio NAME: X``, or ``no
ratio NAME: WHY`` where the two sides did not do the same work: equal_work.py). With
``BENCH_FINDINGS=PATH`` in its environment (``bench.all`` sets it) it also writes
``{"result": {...}, "ratios": {NAME: X}, "no_ratios": {NAME: WHY}}`` to PATH, each time it adds a
figure (what a run that dies halfway found is kept); the summary reads that file, not the output.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common.equal_work import ratio_line, ratio_of

#: the environment variable that names the file ``bench.all`` reads
ENV = "BENCH_FINDINGS"


@dataclass
class Findings:
    result: dict[str, Any] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    no_ratios: dict[str, str] = field(default_factory=dict)

    def show(self, result: dict[str, Any], indent: int = 2) -> None:
        """The benchmark's result, printed as JSON."""
        self.result = result
        print(json.dumps(result, indent=indent), flush=True)
        self._save()

    def ratio(self, label: str, num: float | None, den: float | None, why: list[str]) -> None:
        """``num / den`` as ratio ``label`` where the work was equal (``why`` empty), else why not."""
        print(ratio_line(label, num, den, why), flush=True)
        ratio = ratio_of(num, den, why)
        if isinstance(ratio, str):
            self.no_ratios[label] = ratio
        else:
            self.ratios[label] = round(ratio, 3)
        self._save()

    def value(self, label: str, value: float) -> None:
        """A ratio the benchmark computes itself (against a budget, say), printed and kept."""
        print(f"ratio {label}: {value:.3f}", flush=True)
        self.ratios[label] = round(value, 3)
        self._save()

    def _save(self) -> None:
        path = os.environ.get(ENV)
        if path:
            Path(path).write_text(json.dumps(asdict(self)), encoding="utf-8")
