"""verifiers 0.4 (``verifiers.v1``) runs our envs: its own eval (``run_eval``, what ``vf-eval``
runs) on BabyAI, TextCraft and a third-party scaffold env, against ``agentgym serve-model`` (the
real command, on loopback) backed by the tiny model, scores what our eval scores. The model is the
``react_model`` fixture: taught ``Action: go to red ball 1``, so episodes step the envs for real
(BabyAI's first test tasks solved, actions TextCraft and the scaffold env refuse as observations).

Equality is shown by running both sides with the same sampling (temperature 1, one seed: the
server draws each reply from a stream seeded by the request's seed, so the same messages give
the same reply): verifiers' traces and our ``openai`` policy's episodes must then hold the same
messages, replies, actions and returns; and replaying the actions verifiers recorded through a
fresh env gives its reward again. The env served by ``agentgym serve`` scores what it scores
in-process, and ``vf-eval agentgym_verifiers`` (verifiers' command, a fresh process) loads the id."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.testing import import_or_skip

import_or_skip("verifiers")

import agentgym  # noqa: E402
from agentgym.plugins import get_env_spec  # noqa: E402

pytestmark = pytest.mark.interop

SAMPLING = {"temperature": 1.0, "max_tokens": 32, "seed": 3}
MAX_TURNS = 3


@pytest.fixture(scope="module")
def served(react_model):
    from agentgym_train.serving.server import serve_model_in_process

    with serve_model_in_process(str(react_model), "--max-tokens", "32") as url:
        yield url, react_model.name


def _verifiers_eval(base_url: str, model: str, env: str, out, num_tasks: int = 2, **taskset) -> list:
    """verifiers' own eval runner, configured as ``vf-eval`` configures it."""
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    from agentgym.adapters.verifiers import TASKSET_ID

    ts = {"id": TASKSET_ID, "env": env, "num_tasks": num_tasks, "max_turns": MAX_TURNS, **taskset}
    config = EvalConfig.model_validate(
        {
            "env": {"taskset": ts},
            "model": model,
            "client": {"base_url": base_url},
            "sampling": SAMPLING,
            "push": False,
            "rich": None,
            "output_dir": str(out),
        }
    )
    return asyncio.run(run_eval(config))


def _our_eval(url: str, model: str, env: str, task_ids: list[int]) -> list:
    from agentgym_train.policies.base import Sampling
    from agentgym_train.policies.openai import OpenAIPolicy
    from agentgym_train.rollout.engine import RolloutEngine, Task
    from agentgym_train.rollout.envs import LocalEnvs

    sampling = Sampling(SAMPLING["temperature"], 1.0, SAMPLING["max_tokens"], seed=SAMPLING["seed"])
    policy = OpenAIPolicy(model, base_url=url)
    engine = RolloutEngine(
        policy, {env: LocalEnvs(get_env_spec(env))}, sampling=sampling, max_turns=MAX_TURNS
    )
    return engine.run([Task(env, t, split="test") for t in task_ids])


def _replay(env: str, task_id: int, actions: list[str | None]) -> float:
    """The return of ``actions`` stepped through a fresh env (None: a reply that did not parse)."""
    e = agentgym.make(env)
    try:
        e.reset(options={"task_id": task_id})
        return math.fsum(e.step(a)[1] for a in actions if a is not None)
    finally:
        e.close()


def _check_same_scores(env: str, served, tmp_path, num_tasks: int = 2) -> list:
    url, model = served
    episodes = _verifiers_eval(url, model, env, tmp_path, num_tasks=num_tasks)
    assert len(episodes) == num_tasks and all(e.ok and not e.errors for e in episodes), [
        e.errors for e in episodes
    ]
    traces = [e.traces[0] for e in episodes]
    ids = [t.task.data.task_id for t in traces]
    ours = {ep.task_id: ep for ep in _our_eval(url, model, env, ids)}
    for trace in traces:
        recorded = trace.info["agentgym"]
        ep = ours[trace.task.data.task_id]
        assert ep.error is None
        assert [s["raw_output"] for s in recorded["steps"]] == [s.raw_output for s in ep.steps]
        assert [s["action"] for s in recorded["steps"]] == [s.action for s in ep.steps]
        assert recorded["termination"] == ep.termination
        assert (
            trace.reward == pytest.approx(ep.return_) and trace.rewards["agentgym_return"].score == ep.return_
        )
        assert trace.metrics["turns"] == ep.num_turns and trace.metrics["success"] == float(ep.success)
        # the model saw the same conversation on both sides
        seen = [(m.role, m.content) for m in trace.messages]
        assert seen == [(m.role, m.content) for m in ep.messages][: len(seen)] and len(seen) >= 2
        assert trace.stop_condition in ("terminated", "env_truncated", "max_turns", "format_error")
        actions = [s["action"] for s in recorded["steps"]]
        assert _replay(env, trace.task.data.task_id, actions) == pytest.approx(trace.reward)
    assert any(a is not None for t in traces for a in (s["action"] for s in t.info["agentgym"]["steps"]))
    return traces


def test_babyai_scores_equal_our_eval(served, tmp_path):
    traces = _check_same_scores("babyai", served, tmp_path, num_tasks=4)  # 3 red-ball tasks, 1 other
    assert sum(t.reward > 0 for t in traces) >= 2 and any(t.reward == 0 for t in traces)


def test_babyai_served_by_agentgym_serve_scores_what_it_scores_in_process(served, tmp_path):
    """verifiers' eval against ``agentgym serve babyai`` (its own process; the taskset's ``url``,
    as ``load_environment(url=...)`` sets it): the same replies, actions and returns as the env
    in this process, solved red-ball tasks included."""
    from agentgym.server.background import serve_in_process

    url, model = served
    local = _verifiers_eval(url, model, "babyai", tmp_path / "local", num_tasks=4)
    with serve_in_process(["babyai"]) as server:
        remote = _verifiers_eval(url, model, "babyai", tmp_path / "remote", num_tasks=4, url=server.url)
    assert all(e.ok and not e.errors for e in remote), [e.errors for e in remote]
    by_id = {e.traces[0].task.data.task_id: e.traces[0] for e in local}
    for trace in (e.traces[0] for e in remote):
        assert trace.task.data.url == server.url
        twin = by_id[trace.task.data.task_id]
        steps, twin_steps = trace.info["agentgym"]["steps"], twin.info["agentgym"]["steps"]
        assert [(s["raw_output"], s["action"], s["reward"]) for s in steps] == [
            (s["raw_output"], s["action"], s["reward"]) for s in twin_steps
        ]
        assert trace.reward == twin.reward == trace.rewards["agentgym_return"].score
    assert sum(e.traces[0].reward > 0 for e in remote) >= 2


def test_vf_eval_loads_the_id_in_a_fresh_process(served, tmp_path):
    """``vf-eval agentgym_verifiers ...`` as core's README writes it, verifiers' own command in a
    process of its own that imports nothing of ours first: the id loads and scores BabyAI."""
    url, model = served
    vf_eval = Path(sys.executable).parent / "vf-eval"
    args = ["agentgym_verifiers", "--env.taskset.env", "babyai", "--env.taskset.max-turns", str(MAX_TURNS)]
    args += ["-n", "4", "-m", model, "--client.base-url", url, "--sampling.temperature", "0"]
    args += ["--sampling.max-tokens", "32", "--no-push", "--no-rich", "-o", str(tmp_path / "out")]
    done = subprocess.run([str(vf_eval), *args], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    (traces_file,) = (tmp_path / "out").glob("*/traces.jsonl")  # one episode a line
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines() if line.strip()]
    assert len(episodes) == 4 and all(e["ok"] and not e["errors"] for e in episodes), episodes
    returns = {}
    for (trace,) in (e["traces"] for e in episodes):
        episode, task_id = trace["info"]["agentgym"], trace["task"]["data"]["task_id"]
        returns[task_id] = trace["rewards"]["agentgym_return"]["score"]
        actions = [s["action"] for s in episode["steps"]]
        assert returns[task_id] == episode["return"] == pytest.approx(_replay("babyai", task_id, actions))
    # the first four test tasks; the taught model solves the three red-ball ones
    assert sorted(returns) == list(get_env_spec("babyai").splits["test"].task_ids[:4])
    assert sum(r > 0 for r in returns.values()) >= 2


def test_textcraft_scores_equal_our_eval(served, tmp_path):
    _check_same_scores("textcraft", served, tmp_path)


def test_a_scaffold_env_scores_equal_our_eval(scaffold_env, served, tmp_path):
    _check_same_scores(scaffold_env, served, tmp_path)


def test_load_environment_is_a_verifiers_env():
    import verifiers.v1 as vf

    from agentgym.adapters.verifiers import AgentGymEnv, load_environment

    env = load_environment("babyai", split="test", num_tasks=3, max_turns=4)
    assert isinstance(env, vf.Env) and isinstance(env, AgentGymEnv)
    tasks = list(env.taskset)
    spec = get_env_spec("babyai")
    assert [t.data.task_id for t in tasks] == list(spec.splits["test"].task_ids[:3])
    assert {t.data.max_turns for t in tasks} == {4}


def test_an_env_failure_is_an_error_never_a_score(served, tmp_path):
    """A dead env server: the episode carries the error and no reward."""
    from agentgym.server.background import free_port

    url, model = served
    (episode,) = _verifiers_eval(
        url, model, "babyai", tmp_path, num_tasks=1, url=f"http://127.0.0.1:{free_port()}"
    )
    assert not episode.ok and episode.errors
    assert "reset failed" in episode.errors[-1].message
    assert all("agentgym_return" not in t.rewards for t in episode.traces)
