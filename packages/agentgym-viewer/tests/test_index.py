"""The index on small hand-made sources: which files become sources, how the rows follow the files,
and the reads over them (no trained run, no server)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
from agentgym_viewer.index import SORTS, Index, store

from agentgym.trajectory import Episode, Step


def line(env: str = "guess", task_id: int = 0, **fields) -> str:
    steps = [
        Step(raw_output="Action: guess 5", action="guess 5", observation=fields.pop("observation", "no"))
    ]
    return Episode(env=env, task_id=task_id, steps=steps, num_turns=1, **fields).to_json()


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{x}\n" for x in lines))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``runs/``: a native run (train and val steps, a loose file, an eval beside it), an eval report
    with its episodes, a loose episodes file, and JSON files that are not sources."""
    root = tmp_path / "runs"
    run = root / "alpha"
    write(
        run / "metrics.jsonl",
        json.dumps({"step": 1, "success": 0.5}),
        json.dumps({"step": 2, "success": 0.25}),
    )
    write(run / "episodes" / "step_000001.jsonl", line(task_id=1, success=True), line(task_id=2))
    write(run / "episodes" / "step_000002.jsonl", line(task_id=1, success=True, **{"return": 1.0}))
    write(run / "episodes" / "val_step_000002.jsonl", line(task_id=3, split="test"))
    write(run / "episodes" / "extra.jsonl", line(env="other", task_id=4))
    write(run / "final.episodes.jsonl", line(task_id=5))
    report = {"envs": {"guess": {"success": 0.5, "episodes": 2}}}
    (root / "eval.json").write_text(json.dumps(report))
    write(root / "eval.episodes.jsonl", line(task_id=1, policy="scripted"), line(task_id=6, success=True))
    write(root / "loose.jsonl", line(task_id=7, observation='she said "door" twice'))
    (root / "settings.json").write_text("{}")
    write(root / "notes.jsonl", json.dumps({"note": "not an episode"}))
    return root


def open_index(sources: list[Path], tmp_path: Path, **kwargs) -> Index:
    return Index(sources, cache=tmp_path / "cache", **kwargs)


def test_a_folder_lists_runs_reports_and_episode_files(folder, tmp_path):
    with open_index([folder], tmp_path) as index:
        runs = {r.id: r for r in index.runs()}
        assert list(runs) == ["alpha", "runs-eval.json", "runs-loose.jsonl"]
        alpha = runs["alpha"]
        assert (alpha.backend, alpha.episodes, alpha.steps) == ("native", 6, 2)
        assert (alpha.best_success, alpha.last_success) == (0.5, 0.25)
        assert alpha.envs == ["guess", "other"]
        assert (runs["runs-eval.json"].backend, runs["runs-eval.json"].best_success) == ("eval", 0.5)
        assert runs["runs-loose.jsonl"].backend == "files"
        kinds = {k: index.query(run="alpha", kind=k).total for k in ("train", "val", "file", "eval")}
        assert kinds == {"train": 3, "val": 1, "file": 1, "eval": 1}
        assert index.filter_values("alpha")["step"] == [1, 2]
        assert index.filter_values()["kind"] == ["eval", "file", "train", "val"]
        assert index.per_env_success("alpha") == {"guess": [(1, 0.5), (2, 1.0)]}
        assert index.metrics("runs-eval.json") == [] and index.plots("alpha") == []


def test_a_report_named_outright_brings_its_episodes(folder, tmp_path):
    with open_index([folder / "eval.json"], tmp_path) as index:
        (info,) = index.runs()
        assert info.episodes == 2
        assert (folder / "eval.episodes.jsonl").resolve() in index.roots
        row = index.query(kind="eval", sort="task").rows[0]
        meta, episode = index.episode(row["id"])
        assert (meta["task_id"], episode.policy) == (1, "scripted")
        assert index.raw(row["id"]).decode() == line(task_id=1, policy="scripted") + "\n"


def test_filters_sorts_and_pages(folder, tmp_path):
    with open_index([folder], tmp_path) as index:
        assert index.query().total == 9
        assert index.query(success="yes").total == index.query(success=True).total == 3
        assert index.query(success="no", env="other").total == 1
        assert [r["task_id"] for r in index.query(run="alpha", kind="train", sort="-task").rows] == [2, 1, 1]
        assert index.query(sort="-return").rows[0]["return"] == 1.0
        second = index.query(sort="task", per_page=4, page=2)
        assert (second.pages, second.has_prev, second.has_next, len(second.rows)) == (3, True, True, 4)
        assert index.siblings(index.query(task_id=5).rows[0]["id"]) == []
        assert {s["run_id"] for s in index.siblings(index.query(task_id=1, kind="eval").rows[0]["id"])} == {
            "alpha",
        }
        with pytest.raises(ValueError):
            index.query(sort="nope")
        with pytest.raises(KeyError):
            index.meta(10**9)
        assert set(SORTS) >= {"step", "-return"}


def test_text_search_pages_and_resumes(folder, tmp_path):
    with open_index([folder], tmp_path, search_budget_s=0.0) as index:
        stalled = index.query(text="door")
        assert (stalled.rows, stalled.complete, stalled.has_next) == ([], False, True)
        index.search_budget_s = 5.0
        found = index.query(text='"DOOR"')  # quotes are escaped in the line; case does not matter
        assert [r["task_id"] for r in found.rows] == [7]
        assert (found.total, found.complete, found.candidates, found.has_next) == (None, True, 9, False)
        first, second = (index.query(text="guess 5", per_page=4, page=p) for p in (1, 2))
        assert len(first.rows) == len(second.rows) == 4 and first.has_next
        assert not {r["id"] for r in first.rows} & {r["id"] for r in second.rows}


def test_rows_follow_the_files(folder, tmp_path, monkeypatch):
    progress: list[tuple[int, int, int]] = []
    index = open_index([folder], tmp_path, progress=lambda *a: progress.append(a))
    try:
        assert progress[-1] == (7, 7, 9)
        version = index.version
        # throttled: an episode written within the window of the last refresh is not seen by a
        # plain refresh (the window made long, so no slow moment can end it early) ...
        monkeypatch.setattr(store, "REFRESH_EVERY", 3600.0)
        write(folder / "alpha" / "episodes" / "step_000003.jsonl", line(task_id=9))
        assert not index.refresh() and not index.refresh()
        assert (index.version, index.query().total) == (version, 9)
        # ... until the window has passed: then it is
        monkeypatch.setattr(store, "REFRESH_EVERY", 0.05)
        time.sleep(0.1)
        assert index.refresh() and index.version == version + 1
        assert index.query().total == 10 and index.query(task_id=9).total == 1
        monkeypatch.setattr(store, "REFRESH_EVERY", 3600.0)  # the last refresh starts a new window
        (folder / "alpha" / "episodes" / "step_000003.jsonl").unlink()
        assert not index.refresh() and index.query().total == 10
        assert index.refresh(force=True) and index.query().total == 9
        version = index.version
        (folder / "alpha" / "episodes" / "step_000001.jsonl").unlink()
        assert index.refresh(force=True) and index.version == version + 1
        assert index.query().total == 7 and index.run("alpha").episodes == 4
        assert index.filter_values("alpha")["step"] == [2]
        assert not index.refresh(force=True)
    finally:
        index.close()
    # a run of the same name appears in an earlier source: the other keeps its rows under a new id
    (tmp_path / "more").mkdir()
    with open_index([tmp_path / "more", folder], tmp_path) as index:
        assert index.run("alpha").episodes == 4
        write(tmp_path / "more" / "alpha" / "episodes" / "step_000001.jsonl", line(task_id=8))
        assert index.refresh(force=True)
        assert [r.id for r in index.runs()][:2] == ["alpha", "alpha-2"]
        assert (index.run("alpha").episodes, index.run("alpha-2").episodes) == (1, 4)
        assert index.query(run="alpha-2", kind="val").total == 1


def test_an_index_of_another_schema_is_rebuilt(folder, tmp_path):
    with open_index([folder], tmp_path) as index:
        path = index.db_path
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=0")
    db.execute("DELETE FROM episodes")
    db.commit()
    db.close()
    with open_index([folder], tmp_path) as index:
        assert index.query().total == 9


def test_nothing_outside_the_roots_is_read(tmp_path):
    outside = tmp_path / "outside"
    write(outside / "secret" / "episodes" / "step_000001.jsonl", line(task_id=1))
    root = tmp_path / "runs"
    write(root / "mine" / "episodes" / "step_000001.jsonl", line(task_id=2))
    os.symlink(outside / "secret", root / "linked")
    os.symlink(
        outside / "secret" / "episodes" / "step_000001.jsonl",
        root / "mine" / "episodes" / "step_000002.jsonl",
    )
    with open_index([root], tmp_path) as index:
        assert [r.id for r in index.runs()] == ["mine"]
        assert [r["task_id"] for r in index.query().rows] == [2]
        assert not index.inside(outside / "secret")
        assert index.tokenizer_path(index.query().rows[0]["id"]) is None


def test_verl_metrics_are_renamed(tmp_path):
    run = tmp_path / "runs" / "v"
    (run / "verl").mkdir(parents=True)
    row = {"step": 3, "data": {"actor/entropy": 0.7, "agentgym/success": 0.4, "critic/score/mean": 1.5}}
    write(run / "verl_metrics.jsonl", json.dumps(row))
    (run / "episodes").mkdir()
    with open_index([tmp_path / "runs"], tmp_path) as index:
        (metrics,) = index.metrics("v")
        assert (metrics["step"], metrics["entropy"], metrics["success"], metrics["return"]) == (
            3,
            0.7,
            0.4,
            1.5,
        )
        info = index.run("v")
        assert (info.backend, info.steps, info.best_success) == ("verl", 3, 0.4)


def test_runs_nested_under_a_recipe_are_found_by_their_path(tmp_path):
    """A recipe writes its phases under ``runs/<recipe>/``: naming ``runs/`` finds them there."""
    root = tmp_path / "runs"
    run = root / "demo-x" / "rl-seed0"
    (run / "config.yaml").parent.mkdir(parents=True)
    (run / "config.yaml").write_text("name: rl-seed0\nalgorithm: grpo\n")
    write(
        run / "metrics.jsonl",
        json.dumps({"step": 1, "success": 0.25}),
        json.dumps({"step": 2, "success": 0.75}),
    )
    write(run / "episodes" / "step_000001.jsonl", line(task_id=1, success=True), line(task_id=2))
    (root / "demo-x" / "sft_greedy.json").write_text(json.dumps({"envs": {"guess": {"success": 1.0}}}))
    write(root / "demo-x" / "sft_greedy.episodes.jsonl", line(task_id=3, policy="sft", success=True))
    # a second recipe's phase of the same name is told apart by its recipe
    write(root / "demo-y" / "rl-seed0" / "episodes" / "step_000001.jsonl", line(task_id=4))
    with open_index([root], tmp_path) as index:
        runs = {r.name: r for r in index.runs()}
        assert list(runs) == ["demo-x/rl-seed0", "demo-x/sft_greedy.json", "demo-y/rl-seed0"]
        nested = runs["demo-x/rl-seed0"]
        assert nested.id == "demo-x-rl-seed0" and nested.config["algorithm"] == "grpo"
        assert (nested.backend, nested.episodes, nested.steps) == ("native", 2, 2)
        assert (nested.best_success, nested.last_success) == (0.75, 0.75)
        assert [m["success"] for m in index.metrics(nested.id)] == [0.25, 0.75]
        assert index.per_env_success(nested.id) == {"guess": [(1, 0.5)]}
        report = runs["demo-x/sft_greedy.json"]
        assert (report.id, report.backend, report.episodes, report.best_success) == (
            "demo-x-sft_greedy.json",
            "eval",
            1,
            1.0,
        )
        assert index.query(run="demo-y-rl-seed0").total == 1


def test_a_walk_skips_deep_hidden_and_run_owned_folders(tmp_path):
    root = tmp_path / "runs"
    write(root / "a" / "b" / "c" / "d" / "e" / "six" / "episodes" / "step_000001.jsonl", line(task_id=1))
    write(root / "a" / "b" / "c" / "d" / "e" / "f" / "seven" / "episodes" / "step_000001.jsonl", line())
    write(root / ".trash" / "old" / "episodes" / "step_000001.jsonl", line(task_id=2))
    # a run just started (its config, no metrics yet) and the checkpoints it keeps
    (root / "starting" / "checkpoints" / "step_1" / "episodes").mkdir(parents=True)
    (root / "starting" / "config.yaml").write_text("name: starting\n")
    # a run's own folders are never walked: a run is one source
    write(root / "r" / "metrics.jsonl", json.dumps({"step": 1}))
    write(root / "r" / "evals" / "inner" / "episodes" / "step_000001.jsonl", line(task_id=3))
    os.symlink(root, root / "a" / "loop")
    with open_index([root], tmp_path) as index:
        assert [r.name for r in index.runs()] == ["a/b/c/d/e/six", "r"]
