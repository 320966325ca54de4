"""The ``logger`` key: its names, a tracker whose package is missing, what reaches a tracker, and
what verl is given (the runs that write TensorBoard and wandb files: tests/interop/test_trackers.py)."""

from __future__ import annotations

import math
import sys

import pytest
from agentgym_train.rl.config import ConfigError, TrainConfig
from agentgym_train.rl.trainer import Trainer
from agentgym_train.tracking.trackers import TrackerError, Trackers, scalars, validation_scalars


def _cfg(tmp_path, **extra):
    return TrainConfig.from_dict({"name": "r", "runs_dir": str(tmp_path), "envs": ["guess"], **extra})


def test_logger_defaults_to_the_console_and_names_its_choices(tmp_path):
    assert _cfg(tmp_path).logger == ["console"]
    assert TrainConfig.load(None, ["logger=console,tensorboard,wandb"]).logger == [
        "console",
        "tensorboard",
        "wandb",
    ]
    with pytest.raises(
        ConfigError, match="^logger: unknown tracker 'tensorbord'; choose from console, tensorboard, wandb$"
    ):
        TrainConfig.load(None, ["logger=console,tensorbord"])


@pytest.mark.parametrize("name", ["tensorboard", "wandb"])
def test_a_tracker_without_its_package_fails_in_one_line_before_anything_is_written(
    tmp_path, monkeypatch, name
):
    monkeypatch.setitem(sys.modules, name, None)  # import <name> raises ImportError, as if not installed
    with pytest.raises(TrackerError, match=rf"^logger {name} needs {name}: .*\(pip install {name}\)$") as err:
        Trainer(_cfg(tmp_path, logger=["console", name])).setup()
    assert "\n" not in str(err.value)
    assert not (tmp_path / "r").exists()


class Recorder:
    def __init__(self):
        self.logged, self.closed = [], []

    def log(self, metrics, step):
        self.logged.append((step, dict(metrics)))

    def close(self, failed=False):
        self.closed.append(failed)


def test_only_finite_numbers_reach_the_trackers_at_the_given_step():
    metrics = {"step": 3, "return": 0.5, "turns": 4, "ok": True, "label": "x", "kl": math.nan, "envs": {}}
    assert scalars(metrics) == {"return": 0.5, "turns": 4.0}
    a, b = Recorder(), Recorder()
    trackers = Trackers([a, b])
    trackers.log(metrics, 3)
    trackers.log({"step": 4, "label": "nothing numeric"}, 4)  # nothing to log: no call
    assert a.logged == b.logged == [(3, {"return": 0.5, "turns": 4.0})]
    trackers.close(failed=True)
    trackers.close()  # closing twice closes nothing twice
    assert a.closed == b.closed == [True]


def test_validation_scores_go_under_val():
    entry = {"step": 0, "label": "before", "success": 0.25, "envs": {"babyai": {"success": 0.25, "n": 8}}}
    assert validation_scalars(entry) == {"val/success": 0.25, "val/babyai/success": 0.25, "val/babyai/n": 8.0}


def test_verl_gets_the_same_trackers_beside_its_console_and_file_loggers(tmp_path):
    from agentgym_train.verl_backend.translate import verl_config

    def logger(names):
        return verl_config(_cfg(tmp_path, logger=names), tmp_path, "model", device="cpu")["trainer"]["logger"]

    assert logger(["console"]) == ["console", "file"]
    assert logger(["tensorboard", "console", "wandb"]) == ["console", "file", "tensorboard", "wandb"]
