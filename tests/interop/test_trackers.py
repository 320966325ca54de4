"""The native trainer's trackers as their own tools read them: a real two-step BabyAI run with
``logger: [console, tensorboard, wandb]`` writes events TensorBoard's own reader loads, with the
steps and values of ``metrics.jsonl``, and an offline wandb run directory."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop
pytest.importorskip("tensorboard")

WANDB = importlib.util.find_spec("wandb") is not None


@pytest.fixture(scope="module")
def run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-step GRPO run on BabyAI (the smallest settings), every tracker on."""
    from agentgym_train.config import TrainConfig
    from agentgym_train.trainer import run

    mp = pytest.MonkeyPatch()
    mp.delenv("WANDB_MODE", raising=False)  # the tracker's own default: offline
    mp.setenv("WANDB_SILENT", "true")
    cfg = TrainConfig.from_dict(
        {
            "name": "trackers",
            "runs_dir": str(tmp_path_factory.mktemp("runs")),
            "model": str(tiny_model),
            "envs": ["babyai"],
            "steps": 2,
            "tasks_per_step": 2,
            "n": 2,
            "max_new_tokens": 8,
            "horizon": "fixed",
            "horizon_params": {"horizon": 2},
            "val_limit": 1,
            "val_n": 1,
            "lr": 1e-3,
            "micro_batch_tokens": 1024,
            "logger": ["console", "tensorboard", *(["wandb"] if WANDB else [])],
        }
    )
    try:
        report = run(cfg)
    finally:
        mp.undo()
    return Path(report["run"])


def test_tensorboard_reads_the_steps_and_values_of_metrics_jsonl(run: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    expected: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for key, value in row.items():
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if key != "step" and numeric and math.isfinite(value):
                expected.setdefault(key, []).append((row["step"], float(value)))
    assert {"return", "success", "horizon", "time_step"} <= set(expected)
    assert set(expected) <= tags, set(expected) - tags
    for key, points in expected.items():
        read = [(e.step, e.value) for e in events.Scalars(key)]
        assert [s for s, _ in read] == [s for s, _ in points], key
        for (_, got), (_, want) in zip(read, points, strict=True):
            assert got == pytest.approx(want, rel=1e-6, abs=1e-30), key  # stored as float32
    # the validations before the first step and after the last, at the trainer's step
    assert [e.step for e in events.Scalars("val/success")] == [0, 2]


@pytest.mark.skipif(not WANDB, reason="wandb is not installed")
def test_wandb_writes_an_offline_run_in_the_run_directory(run: Path):
    (offline,) = (run / "wandb").glob("offline-run-*")
    (data,) = offline.glob("run-*.wandb")
    assert data.stat().st_size > 0
    assert (offline / "files").is_dir()
    assert not list((run / "wandb").glob("run-*"))  # offline: no synced (online) run
