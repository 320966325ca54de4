"""Evaluation and collection with the scripted policy, in-process and over real HTTP servers."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from agentgym_train.policies import make_policy
from agentgym_train.policies.base import BasePolicy, Generation
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs
from agentgym_train.rollout.evaluate import evaluate, score

from agentgym.plugins import get_env_spec
from agentgym.server.background import free_port, serve_in_thread
from agentgym.testing.conformance import run_expert
from agentgym.trajectory import read_episodes


def cli(args: list[str]) -> int:
    """Run the agentgym CLI in-process; its exit code."""
    from agentgym.cli import main

    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_scripted_rollout_replays_the_expert_exactly():
    spec = get_env_spec("babyai")
    ids = list(spec.splits["test"].task_ids[:6])
    engine = RolloutEngine(make_policy("scripted"), {"babyai": LocalEnvs(spec)}, max_turns=60, batch_size=4)
    episodes = engine.run([Task("babyai", t) for t in ids])
    env = spec.make()
    for t, ep in zip(ids, episodes, strict=True):
        actions, records, success = run_expert(spec, env, t, 60)
        assert ep.task_id == t
        assert [s.action for s in ep.steps] == actions
        assert [s.reward for s in ep.steps] == [r[1] for r in records]
        assert ep.success == success
        assert ep.messages[0].role == "system" and ep.messages[0].content == spec.prompt


def test_evaluate_scores_and_report_shape():
    spec = get_env_spec("guess")
    report, episodes = evaluate(["guess"], make_policy("scripted"), split="test", n=2, limit=10)
    r = report["envs"]["guess"]
    assert (r["tasks"], r["episodes"], r["n"], r["split"]) == (10, 20, 2, "test")
    assert r["success"] == 1.0 and r["pass"] == 1.0 and r["errors"] == 0
    assert r["terminations"] == {"success": 20}
    assert r["avg"] == pytest.approx(sum(e.return_ for e in episodes) / 20)
    assert r["mean_turns"] == pytest.approx(sum(e.num_turns for e in episodes) / 20)
    cats = {spec.category_of(t) for t in spec.splits["test"].task_ids[:10]}
    assert set(r["categories"]) == cats
    assert sum(c["tasks"] for c in r["categories"].values()) == 10
    assert sorted((e.task_id, e.sample) for e in episodes) == [
        (t, k) for t in range(1000, 1010) for k in (0, 1)
    ]


class FailsOn(BasePolicy):
    """A policy whose backend fails on one task: that episode is an error, not an agent failure."""

    name = "fails-on"

    def __init__(self, task_id):
        self.task_id, self.scripted = task_id, make_policy("scripted")

    async def agenerate(self, requests, sampling):
        out = await self.scripted.agenerate(requests, sampling)
        return [
            Generation("", error="backend down") if r.meta["task_id"] == self.task_id else g
            for r, g in zip(requests, out, strict=True)
        ]


def test_errors_are_counted_apart_and_left_out_of_the_scores():
    report, episodes = evaluate(["guess"], FailsOn(1003), split="test", limit=5)
    r = report["envs"]["guess"]
    assert r["errors"] == 1 and r["terminations"]["error"] == 1
    assert r["success"] == 1.0 and r["episodes"] == 5
    (bad,) = [e for e in episodes if e.termination == "error"]
    assert bad.task_id == 1003 and "backend down" in bad.error


def test_score_pass_at_n_is_any_success_per_task():
    from agentgym.trajectory import Episode

    eps = [
        Episode(env="g", task_id=1, success=True, termination="success", **{"return": 1.0}),
        Episode(env="g", task_id=1, success=False, termination="failure"),
        Episode(env="g", task_id=2, success=False, termination="max_turns"),
        Episode(env="g", task_id=2, success=False, termination="error"),
    ]
    s = score(eps)
    assert s["pass"] == 0.5 and s["success"] == pytest.approx(1 / 3) and s["avg"] == pytest.approx(1 / 3)
    assert s["errors"] == 1 and s["terminations"] == {"error": 1, "failure": 1, "max_turns": 1, "success": 1}


def test_format_errors_end_an_episode_after_three_in_a_row():
    class Babble(BasePolicy):
        name = "babble"

        def generate(self, requests, sampling):
            return [Generation("I am not sure what to do.") for _ in requests]

    engine = RolloutEngine(Babble(), {"guess": LocalEnvs(get_env_spec("guess"))}, max_turns=10)
    (ep,) = engine.run([Task("guess", 1000)])
    assert ep.termination == "format_error" and ep.num_turns == 3
    assert all(s.action is None and s.observation.startswith("Format error") for s in ep.steps)
    assert ep.messages[-1].role == "assistant"


def test_remote_evaluation_matches_in_process():
    policy = make_policy("scripted")
    local, local_eps = evaluate(["guess"], policy, split="test", limit=8)
    with serve_in_thread(["guess"]) as url, serve_in_thread(["guess"]) as url2:
        remote, remote_eps = evaluate(
            ["guess"], policy, split="test", limit=8, urls=[url, url2], batch_size=3
        )
    for key in ("success", "avg", "pass", "mean_turns", "terminations", "categories"):
        assert remote["envs"]["guess"][key] == local["envs"]["guess"][key]
    assert [[s.action for s in e.steps] for e in remote_eps] == [
        [s.action for s in e.steps] for e in local_eps
    ]


def test_reflexion_retries_failed_tasks_with_reflections():
    class FirstTrialFails(BasePolicy):
        """Fails a task's first trial (no reflection in its prompt), then plays the expert."""

        name = "first-fails"

        def __init__(self):
            self.scripted = make_policy("scripted")
            self.reflection_calls = 0

        async def agenerate(self, requests, sampling):
            out = []
            for r in requests:
                if r.messages[-1]["content"].startswith("You did not complete"):
                    self.reflection_calls += 1
                    out.append(Generation("I guessed at random; I should bisect."))
                elif "Your reflections" in r.messages[0]["content"]:
                    out += await self.scripted.agenerate([r], sampling)
                else:
                    out.append(Generation("Action: guess 0"))
            return out

    policy = FirstTrialFails()
    report, episodes = evaluate(["guess"], policy, split="test", limit=3, strategy="reflexion", trials=2)
    r = report["envs"]["guess"]
    assert r["trial_success"][0] == 0.0 and r["trial_success"][-1] == 1.0
    assert policy.reflection_calls == 3
    assert all(e.success and e.reflections == ["I guessed at random; I should bisect."] for e in episodes)


def test_eval_cli_writes_report_and_episodes(tmp_path):
    out = tmp_path / "r.json"
    assert (
        cli(
            [
                "eval",
                "--env",
                "guess",
                "--policy",
                "scripted",
                "--limit",
                "5",
                "--n",
                "2",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert set(report["envs"]["guess"]) >= {
        "split",
        "n",
        "tasks",
        "success",
        "avg",
        "pass",
        "mean_turns",
        "terminations",
        "categories",
    }
    assert report["envs"]["guess"]["success"] == 1.0
    episodes = list(read_episodes(tmp_path / "r.episodes.jsonl"))
    assert len(episodes) == 10 and all(e.policy == "scripted" for e in episodes)


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "--env", "nope", "--policy", "scripted"], "unknown env 'nope'"),
        (["eval", "--env", "guess", "--policy", "hf"], "--policy hf needs --model"),
        (["eval", "--env", "guess", "--policy", "nope"], "unknown policy 'nope'"),
        (["eval", "--env", "guess", "--policy", "scripted", "--split", "dev"], "has no split 'dev'"),
        (["eval", "--env", "guess", "--policy", "hf", "--model", "/no/such/dir"], "does not exist"),
    ],
)
def test_eval_cli_bad_input_is_one_line(args, message):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "agentgym", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_collect_cli_writes_expert_demonstrations(tmp_path):
    from agentgym.trajectory import import_agentgym

    out = tmp_path / "demos.jsonl"
    assert (
        cli(["collect", "--env", "guess", "--policy", "scripted", "--limit", "6", "--output", str(out)]) == 0
    )
    eps = list(read_episodes(out))
    assert len(eps) == 6 and all(e.success and e.split == "train" for e in eps)
    ag = tmp_path / "demos_agentgym.json"
    assert (
        cli(["collect", "--env", "guess", "--limit", "4", "--format", "agentgym", "--output", str(ag)]) == 0
    )
    items = import_agentgym(ag)
    assert [e.task_id for e in items] == [0, 1, 2, 3]
    # AgentGym's format opens with the system prompt as a human turn answered "OK" (no loss).
    assert [m.content for m in items[0].messages if m.role == "assistant"] == ["OK"] + [
        m.content for m in eps[0].messages if m.role == "assistant"
    ]


def test_openai_policy_unreachable_server_is_an_episode_error():
    policy = make_policy(
        "openai", base_url=f"http://127.0.0.1:{free_port()}/v1", model="x", retries=1, backoff=0.01
    )
    report, episodes = evaluate(["guess"], policy, split="test", limit=2)
    assert report["envs"]["guess"]["errors"] == 2
    assert all("unreachable" in e.error for e in episodes)


def test_evaluate_runs_the_task_ids_given_instead_of_the_splits_first():
    report, episodes = evaluate(["guess"], make_policy("scripted"), split="train", task_ids=[7, 3], n=2)
    assert sorted(e.task_id for e in episodes) == [3, 3, 7, 7]
    assert report["envs"]["guess"]["tasks"] == 2 and report["envs"]["guess"]["episodes"] == 4


def test_a_remote_rollout_starts_the_next_episode_in_the_step_that_ends_one():
    """On env servers an episode's last step carries the next pending task's autoreset: its session
    starts that episode in the same request (``RolloutStats.autoresets``), and every episode is
    the one an in-process rollout plays (steps, observations, rewards, messages), in task order."""
    from agentgym_train.rollout.envs import RemoteEnvs

    spec = get_env_spec("guess")
    tasks = [Task("guess", t, sample=k) for t in spec.splits["test"].task_ids[:5] for k in range(2)]
    local = RolloutEngine(make_policy("scripted"), {"guess": LocalEnvs(spec)}, max_turns=12, batch_size=3)
    expected = local.run(tasks)
    with serve_in_thread(["guess"]) as url:
        remote = {"guess": RemoteEnvs(spec, [url])}
        engine = RolloutEngine(make_policy("scripted"), remote, max_turns=12, batch_size=3)
        episodes = engine.run(tasks)
        sessions = httpx.get(f"{url}/metrics").text
    assert engine.stats.autoresets >= len(tasks) - 3  # all but the first batch's, where they ended by the env
    assert [(e.task_id, e.sample) for e in episodes] == [(t.task_id, t.sample) for t in tasks]
    for got, want in zip(episodes, expected, strict=True):
        assert [(s.action, s.observation, s.reward) for s in got.steps] == [
            (s.action, s.observation, s.reward) for s in want.steps
        ]
        assert [m.content for m in got.messages] == [m.content for m in want.messages]
        assert got.success == want.success and got.termination == want.termination
    created = re.search(r"^agentgym_sessions_created_total (\d+)", sessions, re.M)
    assert created is not None and int(created.group(1)) == 3  # one session per batch slot, reused


def test_an_interrupted_evaluation_resumes_from_the_episodes_it_finished(tiny_model):
    """``played``: the episodes a cut run finished are not played again, and the report and the
    episodes equal an uninterrupted run's (sampled at temperature 1: each episode has its own stream)."""
    from agentgym_train.policies.base import Sampling
    from agentgym_train.policies.hf import HFPolicy

    policy = HFPolicy(str(tiny_model), device="cpu", dtype="float32")
    same = dict(split="test", n=2, limit=3, max_turns=2, episode_seed=5,
                sampling=Sampling(temperature=1.0, max_new_tokens=12))  # fmt: skip
    whole_report, whole = evaluate(["babyai"], policy, **same)
    ended = []
    report, episodes = evaluate(["babyai"], policy, played=whole[:4], on_episode=ended.append, **same)

    def played(eps):
        return [(e.task_id, e.sample, [(m.role, m.content) for m in e.messages], e.return_) for e in eps]

    assert sorted(played(ended)) == sorted(played(whole[4:]))  # only the rest was played
    assert played(episodes) == played(whole) and len({tuple(x[2][-1]) for x in played(whole)}) > 1

    def scores(r):  # not the times nor the instances, which depend on the machine and the run
        return {
            k: v
            for k, v in r["envs"]["babyai"].items()
            if not k.endswith("_s") and k not in ("instances_made", "max_instances")
        }

    assert report["envs"]["babyai"]["resumed_episodes"] == 4
    assert scores(report) == {**scores(whole_report), "resumed_episodes": 4}
    with pytest.raises(ValueError, match="react"):
        evaluate(["babyai"], policy, played=whole[:1], strategy="reflexion", **same)


def test_a_recipes_test_phase_keeps_each_episode_and_a_rerun_plays_only_the_rest(tiny_model, tmp_path):
    """The recipe runner's test of a model (``eval_model``) appends each episode as it ends to
    ``<name>.partial.jsonl``; a rerun reads them back and plays the rest (the phase's file and
    report then as an uninterrupted run's), and the finished phase leaves no partial file."""
    from agentgym_train.policies.hf import HFPolicy
    from agentgym_train.recipes.runner import eval_model
    from agentgym_train.rl.config import TrainConfig

    from agentgym.trajectory import write_episodes

    cfg = TrainConfig.from_dict({"envs": ["babyai"], "val_limit": 3, "val_n": 2, "val_max_turns": 2,
                                 "max_new_tokens": 12, "val_temperature": 1.0})  # fmt: skip
    said = []

    def make():
        return HFPolicy(str(tiny_model), device="cpu", dtype="float32")

    whole = eval_model(make, tmp_path / "a" / "sft_sampled.json", cfg, greedy=False, say=said.append)
    assert not (tmp_path / "a" / "sft_sampled.partial.jsonl").exists()
    first = list(read_episodes(tmp_path / "a" / "sft_sampled.episodes.jsonl"))
    write_episodes(tmp_path / "b" / "sft_sampled.partial.jsonl", first[:3])
    resumed = eval_model(make, tmp_path / "b" / "sft_sampled.json", cfg, greedy=False, say=said.append)
    assert "sft_sampled: 3 episodes read back from sft_sampled.partial.jsonl" in [s.strip() for s in said]
    again = list(read_episodes(tmp_path / "b" / "sft_sampled.episodes.jsonl"))
    assert [e.messages for e in again] == [e.messages for e in first] and len(first) == 6
    assert resumed["envs"]["babyai"]["success"] == whole["envs"]["babyai"]["success"]
    assert resumed["envs"]["babyai"]["resumed_episodes"] == 3
    assert not (tmp_path / "b" / "sft_sampled.partial.jsonl").exists()


def test_kept_episodes_drop_errors_and_a_torn_line_before_keeping_more(tmp_path):
    """What a kill leaves (a torn last line) and an outage (an episode that ended in an error) is
    not read back, and the next kept episode starts a line of its own."""
    from agentgym_train.rollout.evaluate import kept_episodes

    from agentgym.trajectory import Episode, write_episodes

    partial = tmp_path / "t.partial.jsonl"
    ok = [Episode(env="guess", task_id=t, termination="success") for t in (1, 2)]
    write_episodes(partial, [*ok, Episode(env="guess", task_id=3, termination="error")])
    with partial.open("a") as f:
        f.write('{"env": "guess", "task_id": 4, "ter')
    with pytest.warns(RuntimeWarning):
        played, keep = kept_episodes(partial)
    assert [e.task_id for e in played] == [1, 2]
    keep(Episode(env="guess", task_id=3, termination="failure"))
    assert [e.task_id for e in read_episodes(partial)] == [1, 2, 3]
