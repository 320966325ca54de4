"""The native trainer's trackers as their own tools read them: a real two-step BabyAI run with
``logger: [console, tensorboard, wandb]`` writes events TensorBoard's own reader loads, with the
steps and values of ``metrics.jsonl``, and an offline wandb run directory."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from agentgym.testing import import_or_skip

pytestmark = pytest.mark.interop
import_or_skip("tensorboard")

WANDB = importlib.util.find_spec("wandb") is not None


@pytest.fixture(scope="module")
def run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-step GRPO run on BabyAI (the smallest settings), every tracker on."""
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import run

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


def test_wandb_writes_an_offline_run_in_the_run_directory(run: Path):
    import_or_skip("wandb")  # skips without it, fails where the environment requires it
    (offline,) = (run / "wandb").glob("offline-run-*")
    (data,) = offline.glob("run-*.wandb")
    assert (offline / "files").is_dir()
    assert not list((run / "wandb").glob("run-*"))  # offline: no synced (online) run
    history = wandb_history(data)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        logged = history[row["step"]]
        for key, value in row.items():
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if key != "step" and numeric and math.isfinite(value):
                assert logged[key] == pytest.approx(value, rel=1e-9), key
    assert {"val/success"} <= set(history[0]) and {"val/success"} <= set(history[rows[-1]["step"]])


def wandb_history(path: Path) -> dict[int, dict[str, float]]:
    """The history rows of an offline wandb run file, by step. wandb 0.31 ships no reader for it:
    the file is a LevelDB-style log (a 7-byte header, 32 KiB blocks of records, each a 4-byte
    checksum, a 2-byte length and a 1-byte type: full, first, middle or last) of wandb's protobuf
    ``Record`` messages, read here with wandb's own protobuf classes."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B", data[:7]
    pos, pending, history = 7, b"", {}
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pending = (
            data[pos + 7 : pos + 7 + length] if kind in (1, 2) else pending + data[pos + 7 : pos + 7 + length]
        )
        pos += 7 + length
        if kind in (1, 4):  # a whole record
            record = wandb_internal_pb2.Record.FromString(pending)
            if record.WhichOneof("record_type") == "history":
                items = record.history.item
                row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
                history.setdefault(int(row["_step"]), {}).update(row)
    return history
