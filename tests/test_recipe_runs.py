"""A recipe run as a new user meets it: ``agentgym train --demo tiny`` honours ``runs_dir=`` and
``name=``, logs a line per step and its learning curve when its output is not a terminal, and
``agentgym view`` on the runs folder lists the recipe's nested runs with their curves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

AGENTGYM = str(Path(sys.executable).parent / "agentgym")
FEW = [
    "tiny.tasks=5",
    "demos=6",
    "sft.epochs=1",
    "sft.max_len=1024",
    "steps=2",
    "tasks_per_step=1",
    "n=2",
    "val_limit=2",
    "val_n=1",
    "val_max_turns=2",
    "max_new_tokens=16",
    "curve_every=1",
    "curve_tasks=2",
    "task_sampler=difficulty",
]


def test_a_recipe_lands_where_told_logs_its_curve_and_the_viewer_lists_it(tmp_path):
    out = subprocess.run(
        [AGENTGYM, "train", "--demo", "tiny", *FEW, "runs_dir=elsewhere", "name=mine"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    recipe = tmp_path / "elsewhere" / "mine"
    assert (recipe / "recipe_report.json").is_file() and not (tmp_path / "runs").exists()
    log = out.stdout
    # the output is a pipe here: progress lines on stderr, the curve's points as they come
    assert "train grpo 2/2" in out.stderr and "flat groups" in out.stderr
    assert "curve at step 0: greedy" in log and "curve at step 2: greedy" in log and "(babyai " in log
    assert "the SFT model: greedy" in log
    run = recipe / "rl-seed0"
    report = json.loads((run / "report.json").read_text())
    assert [p["step"] for p in report["curve"]] == [0, 1, 2]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["curve_success"] for r in rows] == [p["success"] for p in report["curve"][1:]]
    assert all(0 <= r["task_pass_rate_est"] <= 1 for r in rows)

    from agentgym_viewer.index import Index
    from agentgym_viewer.server import serve_in_thread

    with Index([tmp_path / "elsewhere"], cache=tmp_path / "cache") as index:
        runs = {r.name: r for r in index.runs()}
        assert "mine/rl-seed0" in runs and runs["mine/rl-seed0"].backend == "native"
        assert "mine/sft_greedy.json" in runs  # the recipe's evaluations too
        run_id = runs["mine/rl-seed0"].id
        with serve_in_thread(index) as url, httpx.Client(base_url=url, timeout=60) as client:
            listing = client.get("/")
            assert listing.status_code == 200 and "mine/rl-seed0" in listing.text
            page = client.get(f"/run/{run_id}")
            assert page.status_code == 200 and "Greedy curve (test subset)" in page.text
