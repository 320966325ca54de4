"""PNG plots of a run: return, success and horizon against the training step."""

from __future__ import annotations

import json
from pathlib import Path

from agentgym.trajectory import read_jsonl
from agentgym_train.models.checkpoint import atomic_write


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The rows of a run's ``metrics.jsonl``; a torn last line (a run killed while appending) is
    skipped with a warning, any other bad line raises ``ValueError`` naming the file and line."""

    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for lineno, row in read_jsonl(path, "metrics row"):
        if not isinstance(row, dict) or "step" not in row:
            raise ValueError(f"{path}:{lineno}: not a valid metrics row (an object with a 'step')")
        rows.append(row)
    return rows


def plot_run(
    run_dir: str | Path, validation: list[dict] | None = None, curve: list[dict] | None = None
) -> list[Path]:
    """Write ``plots/return.png``, ``plots/success.png`` (with validation points and the greedy
    learning curve when the run has them) and ``plots/horizon.png``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = Path(run_dir)
    rows = read_metrics(run)
    if not rows:
        return []
    report = run / "report.json"
    if (validation is None or curve is None) and report.is_file():
        saved = json.loads(report.read_text())
        validation = saved.get("validation", []) if validation is None else validation
        curve = saved.get("curve", []) if curve is None else curve
    out_dir = run / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = [r["step"] for r in rows]
    written = []
    for key, label in (
        ("return", "mean episode return (train)"),
        ("success", "success rate (train)"),
        ("horizon", "horizon (turn cap)"),
    ):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(steps, [r[key] for r in rows], marker="." if len(rows) < 60 else None, label=label)
        extra = (
            (validation, "o--", "success (validation)"),
            (curve, "s-", "greedy, fixed test subset (curve)"),
        )
        for points, style, name in extra if key == "success" else ():
            if points:
                ax.plot([p["step"] for p in points], [p["success"] for p in points], style, label=name)
        ax.set_xlabel("step")
        ax.set_ylabel(key)
        ax.set_title(f"{run.name}: {label}")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        path = out_dir / f"{key}.png"
        atomic_write(path, lambda tmp, fig=fig: fig.savefig(tmp, dpi=100, format="png"))
        plt.close(fig)
        written.append(path)
    return written
