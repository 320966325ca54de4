"""Crash safety of the native trainer and of the JSON Lines files we write.

* A training run SIGKILLed in the middle of a step, then resumed, ends exactly as a straight run
  (metrics without their timing keys, final weights), even with a torn ``metrics.jsonl`` line and
  a half-written checkpoint left behind.
* Whole-file writes (checkpoint files, ``config.yaml``, ``report.json``, plots) are atomic: a save
  that fails midway leaves the previous file intact and no temporary file behind.
* Readers of files we append to (episodes, metrics) skip a torn last line with a warning; input data
  files (search questions, AgentGym data sets) fail on a bad line, naming the file and line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("agentgym_train")

from agentgym_train.models import checkpoint  # noqa: E402
from agentgym_train.rl.config import TrainConfig  # noqa: E402
from agentgym_train.rl.trainer import TIMING_KEYS, Trainer  # noqa: E402
from agentgym_train.tracking.plots import read_metrics  # noqa: E402

from agentgym.trajectory import Episode, TornLineWarning, import_agentgym, read_episodes  # noqa: E402

CORPUS = [
    "You are playing guess the number. Reply with your reasoning, then one line: Action: guess <number>",
    "I am thinking of a number between 1 and 100. Higher. Lower. Correct!",
    "Thought: The middle of 1..100 is 50.\nAction: guess 50",
] * 20

STEPS = 4
KILL_AT = 3  # SIGKILLed during step 3's update: checkpoints of steps 1 and 2 are complete


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from agentgym_train.models.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny"), texts=CORPUS, vocab_size=400, size="nano")


def _overrides(model, runs_dir, steps):
    return {
        "name": "r",
        "runs_dir": str(runs_dir),
        "model": str(model),
        "envs": ["guess"],
        "steps": steps,
        "tasks_per_step": 2,
        "n": 2,
        "max_new_tokens": 8,
        "horizon": "scaling_inter",
        "horizon_params": {"rounds": [2, 3], "every": 2},
        "val_limit": 2,
        "val_n": 1,
        "lr": 1e-3,
        "micro_batch_tokens": 256,
        "progress": False,
        "save_every": 1,
    }


def _train(overrides):
    trainer = Trainer(TrainConfig.from_dict(overrides))
    trainer.setup()
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer


def _metrics(run):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(run)]


# The killed run: a trainer in a process of its own that, once step KILL_AT's episodes are written
# and its update has begun, says so (a marker file) and waits to be killed. Waiting changes no state.
CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import Trainer

    overrides, kill_at, marker = json.loads(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    from agentgym_train.rl import step

    trainer = Trainer(TrainConfig.from_dict(overrides))
    trainer.setup()
    learn = step.learn

    def learn_then_hang(episodes, *args):
        stats = learn(episodes, *args)
        if trainer.step == kill_at:
            marker.write_text(str(trainer.step))
            time.sleep(600)
        return stats

    step.learn = learn_then_hang  # rl_step calls the update through its module
    trainer.train()
    """
)


@pytest.mark.slow
def test_sigkill_mid_step_then_resume_equals_straight_run(tiny_model, tmp_path):
    t0 = time.monotonic()
    straight = _train(_overrides(tiny_model, tmp_path / "a", STEPS))

    runs = tmp_path / "b"
    marker = tmp_path / "in_step"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            json.dumps(_overrides(tiny_model, runs, STEPS)),
            str(KILL_AT),
            str(marker),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the trainer ended before step {KILL_AT}: {proc.stderr.read()[-3000:]}")
            assert time.monotonic() < deadline, "the trainer never reached the step to kill it in"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()

    run = runs / "r"
    # where the kill left it: mid-step 3, episodes written, no metrics row or checkpoint for it yet
    assert (run / "episodes" / f"step_{KILL_AT:06d}.jsonl").is_file()
    assert [m["step"] for m in read_metrics(run)] == [1, 2]
    assert [p.name for p in checkpoint.checkpoints(run)] == ["step_000001", "step_000002"]
    # what a kill at a worse moment leaves: a torn metrics row and a half-written checkpoint
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "horizon": 3, "ret')
    partial = run / "checkpoints" / f"step_{KILL_AT:06d}"
    partial.mkdir()
    (partial / "weights.pt").write_bytes(b"PK\x03\x04 torn")
    (partial / f".state.pt.{proc.pid}.tmp").write_bytes(b"torn")
    with pytest.warns(TornLineWarning):
        resumed = _train({**_overrides(tiny_model, runs, STEPS), "resume": True})

    assert resumed.step == STEPS
    a, b = _metrics(tmp_path / "a" / "r"), _metrics(run)
    assert [m["step"] for m in b] == list(range(1, STEPS + 1))
    assert a == b
    for (name, p), q in zip(
        straight.learner.model.state_dict().items(), resumed.learner.model.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    report = json.loads((run / "report.json").read_text())
    assert report["steps"] == STEPS
    straight_report = json.loads((tmp_path / "a" / "r" / "report.json").read_text())
    assert [(v["step"], v["label"], v["success"]) for v in report["validation"]] == [
        (v["step"], v["label"], v["success"]) for v in straight_report["validation"]
    ]  # validation entries carry timings too: compared without them
    assert [p.name for p in checkpoint.checkpoints(run)] == [f"step_{i:06d}" for i in range(1, STEPS + 1)]
    assert (run / "metrics.jsonl").read_text().endswith("}\n")  # the torn row is gone, not appended to
    print(f"\nkill-and-resume: {time.monotonic() - t0:.1f}s")


# -- atomic whole-file writes ---------------------------------------------------------------------


def _no_temp_files(folder: Path) -> None:
    assert not [p.name for p in folder.rglob("*.tmp")]


def _failing_replace(monkeypatch):
    def boom(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(checkpoint.os, "replace", boom)


def test_checkpoint_save_failing_midway_keeps_the_previous_one(tmp_path, monkeypatch):
    weights = {"w": torch.ones(3)}
    path = checkpoint.save(tmp_path, 5, weights, {"extra": 1})
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with monkeypatch.context() as m:
        _failing_replace(m)
        with pytest.raises(OSError, match="disk full"):
            checkpoint.save(tmp_path, 5, {"w": torch.zeros(3)}, {"extra": 2})
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    loaded, state = checkpoint.load(path)
    assert torch.equal(loaded["w"], torch.ones(3)) and state["extra"] == 1
    _no_temp_files(tmp_path)

    # a first save that fails leaves no checkpoint that counts (no state.pt)
    with monkeypatch.context() as m:
        _failing_replace(m)
        with pytest.raises(OSError):
            checkpoint.save(tmp_path, 6, weights, {})
    assert [p.name for p in checkpoint.checkpoints(tmp_path)] == ["step_000005"]
    _no_temp_files(tmp_path)


def test_state_written_after_weights_fails_leaves_no_complete_checkpoint(tmp_path, monkeypatch):
    real = os.replace
    calls = []

    def second_fails(src, dst):
        calls.append(Path(dst).name)
        if Path(dst).name == "state.pt":
            raise OSError("killed (simulated)")
        real(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", second_fails)
    with pytest.raises(OSError):
        checkpoint.save(tmp_path, 1, {"w": torch.ones(1)}, {})
    assert calls == ["weights.pt", "state.pt"]
    assert checkpoint.checkpoints(tmp_path) == []
    _no_temp_files(tmp_path)


def test_config_report_and_plots_are_replaced_atomically(tmp_path, monkeypatch):
    from agentgym_train.tracking.plots import plot_run

    checkpoint.write_config(tmp_path, {"steps": 1})
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "return": 0.5, "success": 0.0, "horizon": 2}) + "\n" for s in (1, 2))
    )
    plots = plot_run(tmp_path, [])
    assert {p.name for p in plots} == {"return.png", "success.png", "horizon.png"}
    old_png = {p: p.read_bytes() for p in plots}
    checkpoint.atomic_write(tmp_path / "report.json", json.dumps({"steps": 1}))

    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 3, "return": 1.0, "success": 1.0, "horizon": 3}) + "\n")
    with monkeypatch.context() as m:
        _failing_replace(m)
        with pytest.raises(OSError):
            checkpoint.write_config(tmp_path, {"steps": 2})
        with pytest.raises(OSError):
            checkpoint.atomic_write(tmp_path / "report.json", json.dumps({"steps": 2}))
        with pytest.raises(OSError):
            plot_run(tmp_path, [])
    assert (tmp_path / "config.yaml").read_text() == "steps: 1\n"
    assert json.loads((tmp_path / "report.json").read_text()) == {"steps": 1}
    assert {p: p.read_bytes() for p in plots} == old_png
    _no_temp_files(tmp_path)

    checkpoint.write_config(tmp_path, {"steps": 2})
    assert (tmp_path / "config.yaml").read_text() == "steps: 2\n"
    assert plot_run(tmp_path, []) and (tmp_path / "plots" / "return.png").read_bytes() != old_png[plots[0]]


def test_metrics_append_is_one_whole_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    checkpoint.append_line(path, json.dumps({"step": 1}))
    checkpoint.append_line(path, json.dumps({"step": 2}))
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n'


# -- readers and torn last lines ------------------------------------------------------------------


def _episode(task_id: int) -> str:
    return Episode(env="guess", task_id=task_id).to_json()


def test_read_episodes_skips_a_torn_last_line_with_a_warning(tmp_path):
    path = tmp_path / "step_000001.jsonl"
    path.write_text(_episode(1) + "\n" + _episode(2) + "\n" + _episode(3)[:25], encoding="utf-8")
    with pytest.warns(TornLineWarning, match=f"{path.name}:3: skipping a torn last line"):
        assert [ep.task_id for ep in read_episodes(path)] == [1, 2]
    # a whole last line (its newline written) is read, with no warning
    path.write_text(_episode(1) + "\n" + _episode(2), encoding="utf-8")
    assert [ep.task_id for ep in read_episodes(path)] == [1, 2]


def test_read_episodes_errors_on_a_bad_middle_line(tmp_path):
    path = tmp_path / "eps.jsonl"
    path.write_text(_episode(1) + "\n" + _episode(2)[:25] + "\n" + _episode(3) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{path.name}:2: not a valid episode"):
        list(read_episodes(path))


def test_metrics_readers_skip_a_torn_last_line(tmp_path):
    rows = [{"step": s, "return": 0.1 * s, "success": 0.0, "horizon": 2} for s in (1, 2)]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "retu')
    with pytest.warns(TornLineWarning):
        assert read_metrics(tmp_path) == rows
    # the trainer's reader on resume: rows after the resumed step go, and so does the torn line
    trainer = Trainer.__new__(Trainer)
    trainer.run_dir = tmp_path
    with pytest.warns(TornLineWarning):
        trainer._drop_metrics_after(1)
    assert path.read_text() == json.dumps(rows[0]) + "\n"
    _no_temp_files(tmp_path)
    # a bad line in the middle is not a torn one: an error naming the file and line
    path.write_text(json.dumps(rows[0]) + "\nnot json\n" + json.dumps(rows[1]) + "\n")
    with pytest.raises(ValueError, match="metrics.jsonl:2: not a valid metrics row"):
        read_metrics(tmp_path)


def test_input_data_files_error_on_any_bad_line(tmp_path):
    search = pytest.importorskip("agentgym_search.data")
    from agentgym_search.corpus import CorpusError

    good = json.dumps({"question": "Who?", "golden_answers": ["Ada"]})
    path = tmp_path / "questions.jsonl"
    path.write_text(good + "\n" + '{"question": "Wh' + "\n" + good + "\n")
    with pytest.raises(CorpusError, match=r"questions.jsonl:2: not JSON"):
        search.read_questions(path)
    path.write_text(good + "\n" + '{"question": "Wh')  # a torn last line of an input: an error too
    with pytest.raises(CorpusError, match=r"questions.jsonl:2: not JSON"):
        search.read_questions(path)
    path.write_text(good + "\n")
    assert [q.question for q in search.read_questions(path)] == ["Who?"]

    data = tmp_path / "agentgym.jsonl"
    item = {"item_id": "guess_1", "conversations": [{"from": "human", "value": "hi"}]}
    data.write_text(json.dumps(item) + "\n" + json.dumps(item)[:20] + "\n")
    with pytest.raises(ValueError, match=r"agentgym.jsonl:2: not JSON"):
        import_agentgym(data)
