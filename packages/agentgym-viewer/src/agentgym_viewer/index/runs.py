"""Reads about whole sources: the runs list, a run's summary, metrics, validation, plots and tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentgym_viewer.index.models import RunInfo, Source
from agentgym_viewer.index.scan import integer, number, verl_row
from agentgym_viewer.index.store import Store

PLOT_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def eval_success(report: dict[str, Any]) -> float | None:
    """An eval report's success over all its envs, weighted by their scored episodes."""
    envs = report.get("envs")
    if not isinstance(envs, dict):
        return None
    num = den = 0.0
    for env in envs.values():
        if not isinstance(env, dict) or number(env.get("success")) is None:
            continue
        n = float((env.get("episodes") or 0) - (env.get("errors") or 0)) or 1.0
        num += env["success"] * n
        den += n
    return num / den if den else None


class Runs:
    """The runs and run pages' reads: the store's sources, counted from the index and summed up from
    each run's own files (config, metrics, report, plots)."""

    def __init__(self, store: Store):
        self._store = store
        self._scanner = store.scanner

    def runs(self) -> list[RunInfo]:
        """Every source, in the order found."""
        db = self._store.db
        counts = self._store.cached(
            "counts", lambda: dict(db.execute("SELECT run_id, COUNT(*) FROM episodes GROUP BY run_id"))
        )
        envs = self._store.cached("envs", self._envs_by_run)
        steps = self._store.cached(
            "steps", lambda: dict(db.execute("SELECT run_id, MAX(step) FROM episodes GROUP BY run_id"))
        )
        return [
            self._info(s, counts.get(s.id, 0), envs.get(s.id, []), steps.get(s.id))
            for s in self._store.sources
        ]

    def run(self, run_id: str) -> RunInfo:
        """One run by id; KeyError if there is none."""
        for info in self.runs():
            if info.id == run_id:
                return info
        raise KeyError(run_id)

    def _envs_by_run(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for run_id, env in self._store.db.execute(
            "SELECT DISTINCT run_id, env FROM episodes WHERE env IS NOT NULL ORDER BY run_id, env"
        ):
            out.setdefault(run_id, []).append(env)
        return out

    def _dict(self, path: Path) -> dict[str, Any]:
        loaded = self._scanner.load_json(path)
        return loaded if isinstance(loaded, dict) else {}

    def _info(self, source: Source, count: int, envs: list[str], max_step: int | None) -> RunInfo:
        config: dict[str, Any] = {}
        report: dict[str, Any] = {}
        successes: list[float] = []
        steps = None
        if source.is_run:
            config = self._scanner.config(source.path)
            report = self._dict(source.path / "report.json")
            rows = self.metrics(source.id)
            step_values = [s for r in rows if (s := integer(r.get("step"))) is not None]
            steps = max(step_values) if step_values else max_step
            successes = [v for r in rows if (v := number(r.get("success"))) is not None]
            if not successes:
                successes = [
                    v for p in report.get("validation") or [] if (v := number(p.get("success"))) is not None
                ]
            if not envs and isinstance(config.get("envs"), list):
                envs = [str(e) for e in config["envs"]]
        elif source.report is not None:
            report = self._dict(source.report)
            overall = eval_success(report)
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

    def metrics(self, run_id: str) -> list[dict[str, Any]]:
        """The run's ``metrics.jsonl`` rows (a verl run's ``verl_metrics.jsonl``, renamed to ours);
        a torn or bad line is skipped. [] for a source that is not a run."""
        source = self._store.source(run_id)
        if not source.is_run:
            return []
        path = source.path / "metrics.jsonl"
        if path.is_file():
            rows = self._scanner.load_json(path)
            return rows if isinstance(rows, list) else []
        path = source.path / "verl_metrics.jsonl"
        if path.is_file():
            rows = self._scanner.load_json(path)
            return [verl_row(r) for r in rows] if isinstance(rows, list) else []
        return []

    def validation(self, run_id: str) -> list[dict[str, Any]]:
        """``report.json``'s validation points: ``{"step", "success", "label"}``."""
        info = self.run(run_id)
        points = []
        for p in info.report.get("validation") or []:
            if (
                isinstance(p, dict)
                and integer(p.get("step")) is not None
                and number(p.get("success")) is not None
            ):
                points.append({"step": p["step"], "success": float(p["success"]), "label": p.get("label")})
        return points

    def per_env_success(self, run_id: str) -> dict[str, list[tuple[int, float]]]:
        """Success rate of the run's training episodes per env and step, from the index."""

        def compute() -> dict[str, list[tuple[int, float]]]:
            out: dict[str, list[tuple[int, float]]] = {}
            for env, step, rate in self._store.db.execute(
                "SELECT env, step, AVG(success) FROM episodes WHERE run_id=? AND kind='train' "
                "AND step IS NOT NULL GROUP BY env, step ORDER BY env, step",
                (run_id,),
            ):
                out.setdefault(env, []).append((step, float(rate or 0.0)))
            return out

        return self._store.cached(("per_env", run_id), compute)

    def plots(self, run_id: str) -> list[str]:
        """Names of the images in the run's ``plots/`` folder that lie inside a root."""
        source = self._store.source(run_id)
        folder = source.path / "plots"
        if not source.is_run or not folder.is_dir():
            return []
        return sorted(
            p.name
            for p in folder.iterdir()
            if p.suffix.lower() in PLOT_SUFFIXES and p.is_file() and self._scanner.inside(p)
        )

    def plot_path(self, run_id: str, name: str) -> Path | None:
        """The plot's file if ``name`` is one of :meth:`plots` (a name, never a path), else None."""
        try:
            names = self.plots(run_id)
        except KeyError:
            return None
        if name not in names:
            return None
        path = (self._store.source(run_id).path / "plots" / name).resolve()
        return path if self._scanner.inside(path) and path.is_file() else None

    def tokenizer_path(self, run_id: str) -> Path | None:
        """``<run>/model/tokenizer.json`` of a training run, if it has one."""
        source = self._store.by_id.get(run_id)
        if source is None or not source.is_run:
            return None
        path = source.path / "model" / "tokenizer.json"
        return path if path.is_file() and self._scanner.inside(path) else None
