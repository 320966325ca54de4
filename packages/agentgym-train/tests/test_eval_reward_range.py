"""An env whose returns leave its declared reward range: ``evaluate`` leaves those episodes out of
the scores and lists them, and ``agentgym eval`` warns and exits 3 (after writing the report)."""

from __future__ import annotations

import json
import textwrap

import pytest
from agentgym_train.policies import make_policy
from agentgym_train.rollout.evaluate import evaluate, score

from agentgym.trajectory import Episode

OVERPAYS = textwrap.dedent('''
    from agentgym import EnvSpec, Split, TextEnv, hookimpl

    class Overpays(TextEnv):
        """Say 'win'. Even task ids pay partial credit and then the success on top of it."""
        def reset_task(self, task_id):
            return "Say win.", {"instruction": "Say win."}
        def step_action(self, action):
            if action != "win":
                return "Say win.", 0.0, False, False, {"valid_action": False}
            return "You won.", 1.372 if self.task_id % 2 == 0 else 1.0, True, False, {"success": True}

    def expert(env):
        return lambda obs, info: "win"

    @hookimpl
    def agentgym_envs():
        return [EnvSpec(name="overpays", factory=Overpays, expert=expert, default_max_turns=3,
                        splits={"test": Split(range(6), {"all": list(range(6))})})]
''')


@pytest.fixture
def overpays(tmp_path, monkeypatch):
    """The ``overpays`` env registered next to the installed ones."""
    from agentgym import plugins

    (tmp_path / "overpays_env.py").write_text(OVERPAYS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("AGENTGYM_PLUGIN_MODULES", "overpays_env")
    plugins.reset_registry()
    yield "overpays"
    plugins.reset_registry()


def test_returns_outside_the_range_are_left_out_of_the_scores_and_listed(overpays):
    report, episodes = evaluate([overpays], make_policy("scripted"), split="test", n=2)
    r = report["envs"][overpays]
    assert r["episodes"] == 12 and r["out_of_range"] == 6 and r["errors"] == 0
    assert r["avg"] == 1.0 and r["success"] == 1.0  # the odd ids only; 1.186 with the even ones in
    assert r["reward_range"] == [0.0, 1.0]
    assert sorted((e["task_id"], e["sample"]) for e in r["out_of_range_episodes"]) == [
        (t, k) for t in (0, 2, 4) for k in (0, 1)
    ]
    assert {e["return"] for e in r["out_of_range_episodes"]} == {1.372}
    assert r["categories"]["all"]["out_of_range"] == 6 and r["categories"]["all"]["avg"] == 1.0
    assert len(episodes) == 12  # every episode is kept, to be looked at


def test_score_counts_a_return_below_the_range_too_and_tolerates_rounding():
    eps = [
        Episode(env="g", task_id=1, success=False, termination="failure", **{"return": -0.5}),
        Episode(env="g", task_id=2, success=True, termination="success", **{"return": 1.0 + 1e-12}),
        Episode(env="g", task_id=3, success=False, termination="error", **{"return": 7.0}),
    ]
    s = score(eps, (0.0, 1.0))
    assert s["out_of_range"] == 1 and s["errors"] == 1 and s["avg"] == pytest.approx(1.0)
    assert score(eps)["out_of_range"] == 0  # no range given: nothing checked


def test_eval_cli_warns_and_exits_3_after_writing_the_report(overpays, tmp_path, capsys):
    from agentgym.cli import main

    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--env", overpays, "--policy", "scripted", "--output", str(out)])
    assert exit_info.value.code == 3
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warning == [
        "agentgym: warning: overpays: 3 of 6 episodes returned outside its declared reward range [0, 1] "
        "(from 1.372 to 1.372); they are left out of its scores and listed under out_of_range_episodes "
        f"in the report. The env breaks its contract: `agentgym check {overpays}` shows where."
    ]
    report = json.loads(out.read_text())
    assert report["envs"][overpays]["out_of_range"] == 3 and report["envs"][overpays]["avg"] == 1.0
    assert (tmp_path / "r.episodes.jsonl").exists()


def test_eval_cli_exits_0_on_an_env_that_keeps_its_range(tmp_path, capsys):
    from agentgym.cli import main

    main(
        [
            "eval",
            "--env",
            "guess",
            "--policy",
            "scripted",
            "--limit",
            "2",
            "--output",
            str(tmp_path / "r.json"),
        ]
    )
    assert "warning" not in capsys.readouterr().err
    assert json.loads((tmp_path / "r.json").read_text())["envs"]["guess"]["out_of_range"] == 0
