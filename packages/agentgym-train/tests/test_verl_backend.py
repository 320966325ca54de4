"""The verl backend (``agentgym train --backend verl``), in the hatch environment ``verl``
(``hatch run verl:test``): verl's own config loading and validation, our agent loop against the
native rollout, the horizon keeper, plugin algorithms in verl's estimator registry, the CPU
patches, and verl's real trainer end to end on CPU (two GiGPO steps over an env server, then a
resume; a GRPO step of the real model)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentgym.testing import import_or_skip

pytestmark = pytest.mark.verl
import_or_skip("verl", reason="verl is installed in the hatch env 'verl'")
import_or_skip("transfer_queue", reason="verl's v1 trainer needs TransferQueue (hatch env 'verl')")

import torch  # noqa: E402
from agentgym_train.models.chat import ChatFormat  # noqa: E402
from agentgym_train.policies.base import BasePolicy, Generation, Sampling  # noqa: E402
from agentgym_train.rl.config import TrainConfig  # noqa: E402
from agentgym_train.rollout.engine import RolloutEngine, Task  # noqa: E402
from agentgym_train.rollout.envs import LocalEnvs  # noqa: E402
from agentgym_train.verl_backend import launch  # noqa: E402

from agentgym.plugins import get_env_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
MAX_NEW = 24
AGENTGYM = str(Path(sys.executable).parent / "agentgym")  # the console script of this environment


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from agentgym_train.models.tiny import build_tiny
    from agentgym_train.rollout.experts import expert_texts

    return build_tiny(
        tmp_path_factory.mktemp("tiny") / "m", expert_texts(["babyai", "textcraft"], 10), size="nano"
    )


def _cfg(tmp_path: Path, tiny: Path, **overrides) -> TrainConfig:
    base = {
        "name": "t",
        "runs_dir": str(tmp_path / "runs"),
        "model": str(tiny),
        "envs": ["babyai", "textcraft"],
        "steps": 2,
        "tasks_per_step": 2,
        "n": 2,
        "max_context": 2048,
        "max_new_tokens": MAX_NEW,
        "train_limit": 10,
        "val_limit": 2,
        "horizon": "scaling_inter",
        "horizon_params": {"rounds": [2, 3], "every": 1},
    }
    return TrainConfig.from_dict({**base, **overrides})


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


# -- config ---------------------------------------------------------------------------------------
def test_the_written_config_is_accepted_by_verls_own_loading_and_validation(tmp_path, tiny):
    cfg = _cfg(tmp_path, tiny, algorithm="rloo", mini_batches=2, verl={"trainer": {"logger": ["console"]}})
    plan = launch.prepare(cfg, device="cpu")
    config = launch.load_config(plan)
    assert config.data.train_batch_size == 2 and config.actor_rollout_ref.rollout.n == 2
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size == 1  # tasks_per_step / mini_batches
    assert config.algorithm.adv_estimator == "rloo"
    assert config.actor_rollout_ref.rollout.name == "agentgym_hf"
    assert config.actor_rollout_ref.rollout.agent.default_agent_loop == "agentgym"
    assert list(config.trainer.logger) == ["console"]  # the verl: section is merged last
    assert config.trainer.v1.sampler.sampler_kwargs.horizon == "scaling_inter"
    assert plan.env["VERL_PLATFORM"] == "cpu"
    # sdpa and checkpointing: eager attention without it kept every layer's activations and
    # attention weights for backward (over 18 GB for SmolLM2 at four 2,048-token rows: Ray killed it)
    model = config.actor_rollout_ref.model
    assert model.override_config.attn_implementation == "sdpa" and not model.use_remove_padding
    assert model.enable_gradient_checkpointing
    import pyarrow.parquet as pq
    from agentgym_train.rollout.task_sampling import make_task_sampler

    # the native trainer's draws, step after step, read in order
    rows = pq.read_table(plan.run_dir / "data" / "train.parquet").to_pylist()
    sampler = make_task_sampler("uniform", cfg.train_pool(), cfg.seed)
    assert [(r["env"], r["task_id"]) for r in rows] == sampler.draw(2) + sampler.draw(2)
    assert [r["position"] for r in rows] == [0, 1, 0, 1]  # each draw's place in its step
    assert {r["env"] for r in rows} == {"babyai", "textcraft"} and config.data.shuffle is False
    row = rows[0]
    assert row["agent_name"] == "agentgym" and row["phase"] == "train" and row["split"] == "train"
    assert row["prompt"][0]["content"] == (get_env_spec(row["env"]).prompt or "")
    assert row["category"] == get_env_spec(row["env"]).category_of(row["task_id"])


def test_the_babyai_7b_recipe_dry_run_writes_a_config_verl_accepts(tmp_path):
    recipe = ROOT / "configs" / "babyai-qwen2.5-7b-grpo.yaml"
    out = subprocess.run(
        [AGENTGYM, "train", "--backend", "verl", "--dry-run", "--device", "cuda",
         str(recipe), f"runs_dir={tmp_path}"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "verl accepted the config" in out.stdout and "verl.trainer.main_ppo" in out.stdout
    written = next(tmp_path.glob("*/verl/agentgym_verl.yaml")).read_text()
    assert "adv_estimator: grpo" in written and "name: vllm" in written


def test_native_only_settings_are_refused_with_the_reason(tmp_path, tiny):
    from agentgym.errors import AgentGymError

    with pytest.raises(AgentGymError, match="invalid_action_penalty"):
        launch.prepare(_cfg(tmp_path, tiny, invalid_action_penalty=0.1), device="cpu")
    with pytest.raises(AgentGymError, match="must hold one whole episode"):
        launch.prepare(_cfg(tmp_path, tiny, micro_batch_tokens=1024), device="cpu")
    with pytest.raises(AgentGymError, match="sync mode"):
        launch.prepare(
            _cfg(tmp_path, tiny, verl={"trainer": {"v1": {"trainer_mode": "separate_async"}}}), device="cpu"
        )
    # the keys that decide which of train.parquet's draws a step plays are ours
    with pytest.raises(AgentGymError, match="data.train_batch_size is set from tasks_per_step"):
        launch.prepare(_cfg(tmp_path, tiny, verl={"data": {"train_batch_size": 8}}), device="cpu")
    with pytest.raises(AgentGymError, match="actor_rollout_ref.rollout.n is set from n"):
        launch.prepare(_cfg(tmp_path, tiny, verl={"actor_rollout_ref": {"rollout": {"n": 8}}}), device="cpu")
    assert not (tmp_path / "runs" / "t").exists()  # refused before anything was written


def test_resuming_a_verl_run_with_other_settings_is_refused(tmp_path, tiny):
    from agentgym.errors import AgentGymError

    plan = launch.prepare(_cfg(tmp_path, tiny), device="cpu")
    (plan.run_dir / "checkpoints" / "global_step_2").mkdir(parents=True)
    (plan.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")
    launch.prepare(_cfg(tmp_path, tiny, steps=4, env_urls=["http://h:1"]), device="cpu")  # may change
    with pytest.raises(AgentGymError, match=r"other settings \(lr: 1e-05 -> 0.001\)"):
        launch.prepare(_cfg(tmp_path, tiny, lr=1e-3), device="cpu")
    launch.prepare(_cfg(tmp_path, tiny, lr=1e-3, resume=False), device="cpu")  # starting over


# -- the agent loop against the native rollout ------------------------------------------------------
class HFServerManager:
    """verl's server-manager interface (``generate(request_id, *, prompt_ids, sampling_params)``)
    over our ``agentgym_hf`` rollout server: real generation by the tiny model."""

    def __init__(self, config, tiny):
        from agentgym_train.verl_backend.hf_rollout import HFRolloutServer

        self.server = HFRolloutServer(config.actor_rollout_ref.rollout, {"local_path": str(tiny)}, 0, "cpu")

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        return await self.server.generate(prompt_ids, dict(sampling_params), request_id)


class ScriptedServerManager:
    """The same interface replying fixed texts (their ids and the end-of-turn token)."""

    def __init__(self, chat: ChatFormat, replies):
        self.chat, self.replies = chat, replies

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        ids = self.chat.encode(self.replies(prompt_ids)) + [self.chat.eot_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 1})


class ScriptedPolicy(BasePolicy):
    """The native rollout's policy replying the same texts."""

    name = "scripted-tokens"

    def __init__(self, chat: ChatFormat, replies):
        self.chat, self.replies = chat, replies

    def generate(self, requests, sampling):
        out = []
        for r in requests:
            ids = self.chat.encode(self.replies(r.prompt_ids)) + [self.chat.eot_id]
            out.append(
                Generation(
                    text=self.chat.tokenizer.decode(ids[:-1]), token_ids=ids, logprobs=[-0.5] * len(ids)
                )
            )
        return out


@pytest.fixture(scope="module")
def loop_setup(tmp_path_factory, tiny, ray_local):
    from agentgym_train.verl_backend.keeper import get_keeper

    tmp = tmp_path_factory.mktemp("loop")
    cfg = _cfg(tmp, tiny)
    config = launch.load_config(launch.prepare(cfg, device="cpu"))
    settings = dict(config.agentgym)
    # the sampler holds the keeper in a run; an actor whose handles are all gone is ended
    keeper = get_keeper({**settings, "horizon_params": dict(settings["horizon_params"])}, create=True)
    yield cfg, config
    del keeper


def _loop(config, tiny, manager):
    from agentgym_train.verl_backend.agent_loop import AgentGymAgentLoop
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    tok = AutoTokenizer.from_pretrained(str(tiny))
    return AgentGymAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=manager,
        tokenizer=tok,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )


def _native(config, policy, env, task_id, horizon, backend=None, **engine_options):
    rollout = config.actor_rollout_ref.rollout
    engine = RolloutEngine(
        policy,
        {env: backend or LocalEnvs(get_env_spec(env))},
        sampling=Sampling(temperature=0, max_new_tokens=MAX_NEW),
        max_turns=horizon,
        max_context=rollout.prompt_length + rollout.response_length,
        max_response=rollout.response_length,
        **engine_options,
    )
    (ep,) = engine.run([Task(env, task_id, split="train")])
    return ep


def _play(loop, env, task_id, step=1):
    row = {"env": env, "task_id": task_id, "split": "train", "phase": "train", "global_steps": step,
           "session_id": 0, "index": 0}  # fmt: skip
    greedy = {"temperature": 0, "top_p": 1.0, "top_k": -1, "logprobs": True}
    return asyncio.run(loop.run(greedy, **row))


def _same_sequence(out, ep):
    end = ep.tokens.reward_index + 1
    assert out.prompt_ids + out.response_ids == ep.tokens.ids[:end]
    assert [0] * len(out.prompt_ids) + out.response_mask == ep.tokens.loss_mask[:end]
    assert out.response_mask[-1] == 1  # the score lands on the last sampled token
    assert out.extra_fields["agentgym_termination"] == ep.termination
    assert out.extra_fields["agentgym_turns"] == ep.num_turns


@pytest.mark.parametrize(("env", "task_id"), [("babyai", 3), ("textcraft", 1)])
def test_agent_loop_ids_and_masks_equal_the_native_rollout_with_real_generation(
    loop_setup, tiny, env, task_id
):
    from agentgym_train.policies.hf import HFPolicy

    cfg, config = loop_setup
    out = _play(_loop(config, tiny, HFServerManager(config, tiny)), env, task_id)
    ep = _native(config, HFPolicy(str(tiny), device="cpu", dtype="float32"), env, task_id, horizon=2)
    _same_sequence(out, ep)
    assert out.extra_fields["agentgym_env"] == env and out.extra_fields["agentgym_horizon"] == 2
    assert out.response_logprobs is not None and len(out.response_logprobs) == len(out.response_ids)


@pytest.fixture(scope="module")
def smollm2():
    from agentgym_train.models.gguf import resolve_model

    return resolve_model("smollm2")


@pytest.mark.real_model
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("env", "task_id"), [("babyai", 3), ("textcraft", 1)])
def test_agent_loop_with_the_real_models_tokenizer_equals_the_native_rollout(
    tmp_path_factory, ray_local, smollm2, env, task_id
):
    """SmolLM2's BPE tokenizer and ChatML template through verl's agent loop: the same ids and
    masks as the native rollout, turn after turn (the template stays append-only)."""
    from agentgym_train.policies.hf import HFPolicy
    from agentgym_train.verl_backend.keeper import get_keeper

    cfg = _cfg(tmp_path_factory.mktemp("real"), smollm2, format_hint=True)
    config = launch.load_config(launch.prepare(cfg, device="cpu"))
    settings = dict(config.agentgym)
    keeper = get_keeper({**settings, "horizon_params": dict(settings["horizon_params"])}, create=True)
    out = _play(_loop(config, smollm2, HFServerManager(config, smollm2)), env, task_id)
    ep = _native(
        config, HFPolicy(str(smollm2), device="cpu", dtype="float32"), env, task_id, 2, format_hint=True
    )
    _same_sequence(out, ep)
    assert sum(ep.tokens.loss_mask) > 2 * len(ep.steps)  # real replies, not just end-of-turn tokens
    del keeper


def test_the_rollout_server_batches_concurrent_requests_and_fails_them_together(loop_setup, tiny):
    _, config = loop_setup
    manager = HFServerManager(config, tiny)
    chat = ChatFormat(_loop(config, tiny, None).tokenizer)
    prompts = [
        chat.start([{"role": "user", "content": f"go to the {c} ball"}]) for c in ("red", "blue", "green")
    ]
    greedy = {"temperature": 0, "top_p": 1.0, "max_tokens": 8, "logprobs": True}

    async def together(params):
        return await asyncio.gather(
            *(manager.generate(str(i), prompt_ids=p, sampling_params=params) for i, p in enumerate(prompts)),
            return_exceptions=True,
        )

    calls = []
    generate = manager.server.policy.generate
    manager.server.policy.generate = lambda reqs, sampling: (
        calls.append(len(reqs)) or generate(reqs, sampling)
    )
    batched = asyncio.run(together(greedy))
    assert calls == [3]  # one batched call for requests that arrived together
    alone = [asyncio.run(manager.generate("x", prompt_ids=p, sampling_params=dict(greedy))) for p in prompts]
    assert [o.token_ids for o in batched] == [o.token_ids for o in alone]
    failed = asyncio.run(asyncio.wait_for(together({**greedy, "temperature": "hot"}), timeout=60))
    assert all(isinstance(f, ValueError) for f in failed)  # every waiting request gets the failure


def test_one_worker_state_per_process_when_samples_start_together(loop_setup, tiny):
    from concurrent.futures import ThreadPoolExecutor

    _, config = loop_setup
    loop = _loop(config, tiny, None)
    with ThreadPoolExecutor(8) as pool:
        workers = list(pool.map(lambda _: loop._worker(), range(16)))
    assert len({id(w) for w in workers}) == 1


def _replies(text):
    return lambda prompt_ids: text


def test_format_errors_end_the_episode_as_natively(loop_setup, tiny):
    _, config = loop_setup
    chat = ChatFormat(_loop(config, tiny, None).tokenizer)
    out = _play(
        _loop(config, tiny, ScriptedServerManager(chat, _replies("I am not sure."))), "babyai", 5, step=2
    )
    ep = _native(config, ScriptedPolicy(chat, _replies("I am not sure.")), "babyai", 5, horizon=3)
    _same_sequence(out, ep)
    assert ep.termination == "format_error" and ep.num_turns == 3


def _turn_capped(config, tiny):
    """BabyAI task 7 played to its 2-turn cap through the agent loop and natively: both."""
    chat = ChatFormat(_loop(config, tiny, None).tokenizer)
    reply = _replies("Thought: look around.\nAction: turn left")
    out = _play(_loop(config, tiny, ScriptedServerManager(chat, reply)), "babyai", 7, step=1)
    ep = _native(config, ScriptedPolicy(chat, reply), "babyai", 7, horizon=2)
    _same_sequence(out, ep)
    return out, ep


def test_the_turn_cap_ends_the_episode_as_natively(loop_setup, tiny):
    _, config = loop_setup
    out, ep = _turn_capped(config, tiny)
    assert ep.termination == "max_turns" and ep.num_turns == 2 == out.extra_fields["agentgym_horizon"]


def test_the_agent_loop_plays_on_env_servers_as_in_process(loop_setup, tiny, tmp_path):
    """``env_urls``: the loop's episodes run as sessions on real loopback servers (AsyncEnvPool)."""
    from agentgym.server.background import serve_in_thread

    _, config = loop_setup
    chat = ChatFormat(_loop(config, tiny, None).tokenizer)
    reply = _replies("Thought: look around.\nAction: turn right")
    with serve_in_thread(["babyai"]) as url:
        remote = launch.load_config(launch.prepare(_cfg(tmp_path, tiny, env_urls=[url]), device="cpu"))
        loop = _loop(remote, tiny, ScriptedServerManager(chat, reply))
        out = _play(loop, "babyai", 11)
        assert type(loop._worker().backends["babyai"]).__name__ == "RemoteEnvs"
    ep = _native(config, ScriptedPolicy(chat, reply), "babyai", 11, horizon=2)
    _same_sequence(out, ep)


def test_an_env_failure_drops_the_sample_instead_of_scoring_it(loop_setup, tiny):
    import ray
    from agentgym_train.verl_backend.agent_loop import EpisodeFailed
    from agentgym_train.verl_backend.keeper import get_keeper

    from agentgym.protocol import StepOutcome

    cfg, config = loop_setup
    chat = ChatFormat(_loop(config, tiny, None).tokenizer)
    reply = _replies("Thought: go.\nAction: turn left")

    class Failing(LocalEnvs):
        async def step(self, pairs):
            return [StepOutcome(error="the env crashed") for _ in pairs]

    loop = _loop(config, tiny, ScriptedServerManager(chat, reply))
    worker = loop._worker()
    worker.backend("babyai")
    worker.backends["babyai"] = Failing(get_env_spec("babyai"))
    try:
        with pytest.raises(EpisodeFailed, match="the env crashed"):
            _play(loop, "babyai", 9, step=7)
    finally:
        del worker.backends["babyai"]
    ep = _native(config, ScriptedPolicy(chat, reply), "babyai", 9, 2, Failing(get_env_spec("babyai")))
    assert ep.termination == "error"
    keeper = get_keeper(dict(config.agentgym))
    assert ray.get(keeper.metrics.remote(7))["agentgym/env_errors"] == 1.0  # recorded, never scored
    lines = (Path(cfg.runs_dir) / cfg.name / "episodes" / "step_000007.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["termination"] == "error"


# -- horizon schedules --------------------------------------------------------------------------------
def _settings(tmp_path, **kw):
    return {"name": "k", "run_dir": str(tmp_path), "checkpoint_dir": str(tmp_path / "ckpt"), "resume": True,
            "horizon": "scaling_inter", "horizon_params": {"rounds": [6, 13, 20], "every": 2}, **kw}  # fmt: skip


def _checkpoint(keeper, tmp_path, step):
    d = tmp_path / "ckpt" / f"global_step_{step}"
    d.mkdir(parents=True)
    keeper.save(str(d), step)
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_scaling_inter_horizon_follows_the_steps_and_a_resume(tmp_path):
    from agentgym_train.verl_backend.keeper import RunKeeper

    keeper = RunKeeper(_settings(tmp_path))
    assert [keeper.horizon(s) for s in range(1, 8)] == [6, 6, 13, 13, 20, 20, 20]
    _checkpoint(keeper, tmp_path, 3)
    resumed = RunKeeper(_settings(tmp_path))
    assert resumed.ready() == 3 and resumed.horizon(4) == 13 and resumed.horizon(5) == 20
    # validation plays each env's own turn cap, or val_max_turns (as the native trainer validates)
    assert resumed.horizon(4, phase="val", env="babyai") == get_env_spec("babyai").default_max_turns
    assert RunKeeper(_settings(tmp_path, val_max_turns=9)).horizon(4, phase="val", env="babyai") == 9


def test_adaptive_horizon_state_survives_a_resume(tmp_path):
    from agentgym_train.verl_backend.keeper import RunKeeper

    from agentgym.trajectory import Episode

    settings = _settings(tmp_path, horizon="adaptive", horizon_params={"rounds": [2, 4, 8], "threshold": 0.5})
    keeper = RunKeeper(settings)

    def ended(term):
        return Episode(env="babyai", task_id=0, termination=term)

    assert keeper.horizon(1) == 2
    keeper.record(1, "train", ended("success"))  # truncation rate 0 < 0.5: next horizon
    assert keeper.horizon(2) == 4
    for _ in range(3):
        keeper.record(2, "train", ended("max_turns"))  # rate 1: stay
    _checkpoint(keeper, tmp_path, 2)
    resumed = RunKeeper(settings)
    assert resumed.horizon(3) == 4 == keeper.horizon(3)
    resumed.record(3, "train", ended("failure"))
    assert resumed.horizon(4) == 8


# -- algorithms -----------------------------------------------------------------------------------------
def test_a_plugin_algorithm_runs_through_verls_estimator_registry(monkeypatch):
    from agentgym_train.rl.algorithms import grpo_advantages
    from agentgym_train.rl.specs import AlgorithmSpec
    from agentgym_train.verl_backend import estimators
    from verl.trainer.ppo import core_algos

    from agentgym.plugins import get_registry

    def centered(b, scale=1.0, **_):  # a third party's estimator: score minus the group mean
        adv, _ = grpo_advantages(b.token_level_rewards, b.mask, b.index, norm_by_std=False)
        return adv * scale, adv * scale

    class Plugin:
        from agentgym.hookspecs import hookimpl

        @hookimpl
        def agentgym_algorithms(self):
            return [AlgorithmSpec("centered", centered, needs_groups=True, params={"scale": 2.0})]

    registry = get_registry()
    registry.pm.register(Plugin(), name="centered-plugin")
    try:
        assert "agentgym_centered" in estimators.register()
        fn = core_algos.get_adv_estimator_fn("agentgym_centered")
        rewards = torch.zeros(4, 5)
        rewards[:, -1] = torch.tensor([1.0, 0.0, 1.0, 1.0])
        mask = torch.ones(4, 5)
        index = ["a", "a", "b", "b"]
        adv, _ = fn(token_level_rewards=rewards, response_mask=mask, index=index, config=None)
        assert torch.allclose(adv[:, 0], torch.tensor([1.0, -1.0, 0.0, 0.0]))  # scale 2 x (0.5, -0.5)
        # algo_params reach it through verl's algorithm config, as translate writes them
        from omegaconf import OmegaConf

        algorithm = OmegaConf.create({"agentgym_params": {"scale": 3.0}})
        adv, _ = fn(token_level_rewards=rewards, response_mask=mask, index=index, config=algorithm)
        assert torch.allclose(adv[:, 0], torch.tensor([1.5, -1.5, 0.0, 0.0]))
    finally:
        registry.pm.unregister(name="centered-plugin")


def test_gigpo_turns_travel_in_the_agent_loops_extra_fields_relative_to_the_response(loop_setup, tiny):
    """Each sample's turns (span, anchor state, reward) ride in its extra fields, the spans moved
    to verl's response (which starts at the first sampled token): the native episode's turns."""
    from agentgym_train.rl.batch import episode_score, episode_turns, turn_spans
    from agentgym_train.verl_backend.estimators import turns_of

    _, config = loop_setup
    out, ep = _turn_capped(config, tiny)
    reward = config.agentgym.reward
    native = episode_turns(ep, reward, episode_score(ep, reward))
    cut = len(out.prompt_ids)
    turns = turns_of(out.extra_fields)
    assert len(turns) == ep.num_turns == 2
    assert [(t.start + cut, t.end + cut, t.anchor, t.reward) for t in turns] == [
        (t.start, t.end, t.anchor, t.reward) for t in native
    ]
    assert [(t.start, t.end) for t in turns] == turn_spans(out.response_mask)  # verl's mask's runs


def _verl_gigpo_batch():
    """A hand-made batch as verl's trainer holds it (token rewards, response mask, ``uid``) and each
    row's extra fields as TransferQueue returns them: two tasks, anchors shared within each."""
    import numpy as np
    from agentgym_train.rl.algorithms import Turn
    from agentgym_train.verl_backend.estimators import turn_fields
    from verl import DataProto
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    rows = [("x", [("s", 0.0), ("A", 0.0), ("B", 1.0)]), ("x", [("s", 0.0), ("C", 0.0), ("A", 0.0)]),
            ("x", [("s", 0.0), ("A", 0.5)]), ("y", [("s", 0.0), ("A", 0.2)]), ("y", [("s", 0.0), ("D", 0.0)])]  # fmt: skip
    width = 2 + 5 * max(len(steps) for _, steps in rows)  # 2 tokens of a turn, 3 of an observation
    mask, rewards, turns = torch.zeros(len(rows), width), torch.zeros(len(rows), width), []
    for r, (_, steps) in enumerate(rows):
        turns.append([Turn(5 * t, 5 * t + 2, anchor, reward) for t, (anchor, reward) in enumerate(steps)])
        for turn in turns[-1]:
            mask[r, turn.start : turn.end] = 1
        rewards[r, turns[-1][-1].end - 1] = sum(reward for _, reward in steps)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask.long()},
        non_tensors={"uid": np.array([task for task, _ in rows], dtype=object)},
    )
    extra = [{"agentgym_env": "babyai", **turn_fields(t, offset=0)} for t in turns]
    return data, list_of_dict_to_tensordict([{"extra_fields": e} for e in extra]), turns


def test_gigpo_bridged_through_verls_advantage_step_equals_the_native_estimator(monkeypatch):
    """verl hands a registered estimator no per-sample data: the patched advantage step fetches the
    rows' extra fields by the batch's keys and gives the bridged ``agentgym_gigpo`` their turns;
    its advantages are the native ``gigpo``'s on the same batch. verl's estimators pass through."""
    import transfer_queue as tq
    from agentgym_train.rl.algorithms import Batch, gigpo, grpo_advantages
    from agentgym_train.rl.specs import get_algorithm
    from agentgym_train.verl_backend import estimators
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.trainer.ppo.v1 import trainer_base

    verls = trainer_base.compute_advantage_for_multi_trajectories
    monkeypatch.setattr(trainer_base, "compute_advantage_for_multi_trajectories", verls)  # back after
    estimators.register()
    estimators.patch_compute_advantage()
    step = trainer_base.compute_advantage_for_multi_trajectories
    data, stored, turns = _verl_gigpo_batch()
    keys = [f"{uid}_{i}_0" for i, uid in enumerate(data.non_tensor_batch["uid"])]
    asked = []

    def kv_batch_get(keys, partition_id, select_fields):
        asked.append((list(keys), partition_id, list(select_fields)))
        return stored

    monkeypatch.setattr(tq, "kv_batch_get", kv_batch_get)
    algorithm = OmegaConf.create({"agentgym_params": {"omega": 0.5}})
    rewards, mask = data.batch["token_level_rewards"].clone(), data.batch["response_mask"].float()
    out = step(data, batch_keys=keys, adv_estimator="agentgym_gigpo", gamma=0.95, lam=1.0, num_repeat=2,
               norm_adv_by_std_in_grpo=True, config=algorithm)  # fmt: skip
    assert asked == [(keys, "train", ["extra_fields"])]
    params = {**get_algorithm("gigpo").params, "omega": 0.5}
    expected, _ = gigpo(Batch(rewards, mask, ["x", "x", "x", "y", "y"], turns=turns), **params)
    assert torch.allclose(out.batch["advantages"], expected)
    assert torch.equal(out.batch["returns"], out.batch["advantages"])
    episode, _ = grpo_advantages(rewards, mask, ["x", "x", "x", "y", "y"])
    assert (out.batch["advantages"] - episode).abs().max() > 0.1  # the turn-level part is there
    # verl's own estimators go to verl's function, which reads no extra fields
    data, _, _ = _verl_gigpo_batch()
    asked.clear()
    out = step(data, batch_keys=keys, adv_estimator="rloo", config=algorithm)
    assert asked == []
    verl_rloo = compute_advantage(_verl_gigpo_batch()[0], "rloo", config=algorithm)
    assert torch.equal(out.batch["advantages"], verl_rloo.batch["advantages"])


# -- verl on CPU ------------------------------------------------------------------------------------------
def test_tree_memory_counts_a_runs_descendants_and_step_figures_read_verls_metrics(tmp_path):
    from agentgym_train.verl_backend.usage import TreeMemory, step_figures

    hold = "import time; b = bytearray(400 << 20); b[::4096] = bytes(len(range(0, 400 << 20, 4096))); time.sleep(3)"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {hold!r}])"
    proc = subprocess.Popen([sys.executable, "-c", parent])
    with TreeMemory(proc.pid, every=0.2) as memory:
        proc.wait()
    assert 0.39 < memory.peak_gb < 1.5, memory.peak_gb  # the grandchild's 400 MB, counted once
    metrics = tmp_path / "m.jsonl"
    rows = [{"step": 0, "data": {"val/x": 1}},
            {"step": 1, "data": {"timing_s/step": 2.5, "actor/perf/max_memory_allocated_gb": 0.0}},
            {"step": 2, "data": {"timing_s/step": 3.0, "actor/perf/max_memory_allocated_gb": 1.5}}]  # fmt: skip
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert step_figures(metrics) == {"steps": 2, "step_time_s": 5.5, "peak_gpu_gb": 1.5}
    assert step_figures(tmp_path / "none.jsonl") == {"steps": 0, "step_time_s": 0, "peak_gpu_gb": None}
    from agentgym_train.cli.train import verl_usage_line

    one = {
        "code": 0,
        "wall_s": 9.0,
        "peak_memory_gb": 2.5,
        "steps": 1,
        "step_time_s": 4.0,
        "peak_gpu_gb": 1.5,
    }
    line = verl_usage_line(one)
    assert (
        line.startswith("peak memory: 2.5 GB (PSS of") and "GPU 1.5 GB" in line and "(1 step: 4.0 s)" in line
    )
    assert "not counted" in verl_usage_line(one, on_cluster=True)  # a joined cluster's workers: not ours


def test_the_cpu_patches_refuse_another_verl_version(monkeypatch):
    import verl
    from agentgym_train.verl_backend import cpu

    monkeypatch.setattr(verl, "__version__", "0.10.0")
    with pytest.raises(cpu.VerlVersionError, match="verl 0.10.0 is installed"):
        cpu.check_verl_version()


def test_the_process_group_patch_gives_cpu_a_single_gloo_backend(monkeypatch):
    """Patch 1: verl's backend string is a duplicate on CPU; the patched function starts gloo."""
    code = (
        "import os, torch.distributed as d\n"
        "os.environ.update(VERL_PLATFORM='cpu', RANK='0', WORLD_SIZE='1', MASTER_ADDR='127.0.0.1', MASTER_PORT='29533')\n"
        "from agentgym_train.verl_backend import cpu\n"
        "cpu.install()\n"
        "from verl.utils import distributed\n"
        "distributed.initialize_global_process_group_ray()\n"
        "print('backend', d.get_backend())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "backend cpu:gloo" in out.stdout
    unpatched = code.replace("cpu.install()\n", "from verl.plugin.platform.platform_manager import set_platform\n"
                             "cpu.register_platform(); from verl.utils.device import get_device_name\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", unpatched], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0  # verl's own string, "cpu:gloo,cpu:gloo", is refused: the patch is needed


def test_the_reference_offload_patch_stops_pinning_without_cuda():
    """Patch 2: the reference model's CPU offload asks for pinned memory, which needs CUDA."""
    from agentgym_train.verl_backend import cpu
    from verl.workers.engine.fsdp import transformer_impl as impl

    cpu.patch_ref_offload_pinning()
    policy = impl.CPUOffloadPolicy(pin_memory=True)
    assert policy.pin_memory is torch.cuda.is_available()
    from torch.distributed.fsdp import CPUOffloadPolicy

    assert isinstance(policy, CPUOffloadPolicy)


# -- verl's trainer, end to end on CPU ------------------------------------------------------------------------
def _steps(log: str) -> dict[int, dict[str, str]]:
    out = {}
    for line in log.splitlines():
        m = re.search(r"step:(\d+) - (.*)", line)
        if m and "agentgym/" in m.group(2):
            out[int(m.group(1))] = dict(kv.split(":", 1) for kv in m.group(2).split(" - ") if ":" in kv)
    return out


# One `agentgym train` of these tests takes 2-5 minutes alone, but CI runs verl's suite beside the
# README's (2 cores): on an AVX2-only EPYC two runs passed 900 s there (stop 78), and with this limit
# the gigpo test's two took 1,288 s (before they were verl_run's and its resume). A hang still ends.
TRAIN_TIMEOUT = 2400


def _train(tmp_path, steps, *more, backend="verl", env=None):
    device = ["--device", "cpu"] if backend == "verl" else []
    args = [AGENTGYM, "train", "--backend", backend, *device,
            "name=e2e", f"runs_dir={tmp_path}", "envs=babyai", f"steps={steps}", "tasks_per_step=2", "n=2",
            "train_limit=20", "val_limit=2", "val_n=1", "tiny_tasks=20", "max_context=2048",
            f"max_new_tokens={MAX_NEW}", "lr=1e-3", "horizon=scaling_inter",
            "horizon_params={rounds: [2, 3], every: 1}", *more]  # fmt: skip
    out = subprocess.run(args, capture_output=True, text=True, timeout=TRAIN_TIMEOUT, env=env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-5000:]
    return out.stdout + out.stderr


@dataclass
class VerlRun:
    dir: Path  # the run's folder
    log: str  # what it printed
    settings: tuple[str, ...]  # its overrides but the step count (a resume passes them again)
    env: dict[str, str]  # its process environment
    token: str  # the env server's


@pytest.fixture(scope="module")
def verl_run(tmp_path_factory, tiny):
    """Two GiGPO steps of verl's trainer on the tiny model (sampling at temperature 1), its envs
    sessions on a server that needs a token, read from ``env_token_file``. The server stays up
    while the module runs, for a resume. One run for the tests below: each launch is minutes."""
    from agentgym.server.background import serve_in_thread

    tmp = tmp_path_factory.mktemp("verl_e2e")
    token = "tok-5b7c2d9e11f0-VERLSECRET"
    (tmp / "secret").write_text(token + "\n")
    env = {k: v for k, v in os.environ.items() if k != "AGENTGYM_TOKEN"}
    with serve_in_thread(["babyai"], token=token) as url:
        settings = (*_same_as_native(tiny), f"env_urls=[{url}]", f"env_token_file={tmp / 'secret'}")
        log = _train(tmp, 2, *settings, env=env)
        yield VerlRun(tmp / "e2e", log, settings, env, token)


def _same_as_native(tiny: Path) -> tuple[str, ...]:
    return ("algorithm=gigpo", "val_before=false", f"model={tiny}", "temperature=1.0")


@pytest.mark.slow
@pytest.mark.timeout(2 * TRAIN_TIMEOUT + 300)
def test_verl_plays_the_native_trainers_episodes_and_keeps_the_env_token_off_disk(tmp_path, tiny, verl_run):
    """The same config on both backends (each episode from its seeded stream; verl's envs on a
    server, the native trainer's in-process, one step of verl's two): the same tasks, and the same
    episodes token for token (prompts, replies, ids, loss masks) at the first step. verl's env token
    is handed to its workers in the process environment: no file under the run directory and
    nothing printed holds it."""
    from agentgym.trajectory import read_episodes

    _train(tmp_path, 1, *_same_as_native(tiny), backend="native", env=verl_run.env)

    def played(run):
        episodes = read_episodes(run / "episodes" / "step_000001.jsonl")
        return sorted(
            (e.group, e.sample, e.task_id, [(m.role, m.content) for m in e.messages], e.tokens.ids,
             e.tokens.loss_mask, e.termination)
            for e in episodes
        )  # fmt: skip

    native, verl = played(tmp_path / "e2e"), played(verl_run.dir)
    assert len(native) == 4 and [x[:3] for x in native] == [x[:3] for x in verl]  # the same draws
    assert native == verl
    assert len({tuple(x[4]) for x in native}) > 1  # sampled: not every episode the same
    token, files = verl_run.token, [p for p in verl_run.dir.rglob("*") if p.is_file()]
    assert len(files) > 10 and [p for p in files if token.encode() in p.read_bytes()] == []
    secret = str(verl_run.dir.parent / "secret")
    assert token not in verl_run.log and secret in (verl_run.dir / "config.yaml").read_text()


@pytest.mark.slow
@pytest.mark.timeout(2 * TRAIN_TIMEOUT + 300)
def test_two_gigpo_steps_on_verls_trainer_then_a_resume(tiny, verl_run):
    """Two steps and a resume with ``gigpo``, a bridged estimator: verl's advantage step gives it
    each sample's turns (without them it raises and the run fails), after the restart too. (GRPO,
    verl's own estimator, trains end to end in the real-model test below.)"""
    from safetensors.torch import load_file

    run, log = verl_run.dir, verl_run.log
    assert "adv_estimator: agentgym_gigpo" in (run / "verl" / "agentgym_verl.yaml").read_text()
    steps = _steps(log)
    assert sorted(steps) == [1, 2]
    assert [float(steps[s]["agentgym/horizon"]) for s in (1, 2)] == [2.0, 3.0]  # scaling_inter
    # memory and time, as every training command reports them: the tree's peak holds a model
    usage = re.search(r"peak memory: ([\d.]+) GB \(PSS of verl, Ray and their workers\), time ([\d.]+) s "
                      r"\(2 steps: ([\d.]+) s\)", log)  # fmt: skip
    assert usage, log[-3000:]
    peak, wall, step_time = map(float, usage.groups())
    assert peak > 0.5 and 0 < step_time < wall  # its budget: bench/speed/verl_step.py's figure
    # the episodes and verl's metrics file
    for s in (1, 2):
        lines = (run / "episodes" / f"step_{s:06d}.jsonl").read_text().splitlines()
        assert len(lines) == 4 and all(json.loads(x)["max_turns"] == s + 1 for x in lines)
    metrics = {
        m["step"]: m["data"] for m in map(json.loads, (run / "verl_metrics.jsonl").read_text().splitlines())
    }
    assert "agentgym/success" in metrics[1] and "agentgym/success" in metrics[2]
    assert "critic/advantages/mean" in metrics[1] and "actor/pg_loss" in metrics[2]
    # step 2 was sampled with the weights step 1 trained (the rollout server loaded them; both in
    # fp32): verl's rollout and actor probabilities of the sampled tokens agree
    assert metrics[2]["training/rollout_probs_diff_max"] < 1e-4
    assert metrics[2]["actor/kl_loss"] > 0
    # the weights changed, and verl saved a checkpoint with our horizon state
    ckpt = run / "checkpoints" / "global_step_2"
    assert (ckpt / "agentgym_horizon.json").is_file()
    trained = torch.load(ckpt / "actor" / "model_world_size_1_rank_0.pt", weights_only=False)
    start = load_file(tiny / "model.safetensors")
    changed = [k for k, v in start.items() if k in trained and not torch.equal(v, trained[k].full_tensor()
               if hasattr(trained[k], "full_tensor") else trained[k])]  # fmt: skip
    assert changed, "no weight changed after two GiGPO steps"
    # a longer run of the same name (its env server still up) resumes from step 2 and runs step 3
    # only; it changes verl_run's folder, so this test runs after the one above (file order)
    log = _train(run.parent, 3, *verl_run.settings, env=verl_run.env)
    assert verl_run.token not in log
    steps = _steps(log)
    assert sorted(steps) == [3] and float(steps[3]["agentgym/horizon"]) == 3.0
    assert (run / "checkpoints" / "global_step_3").is_dir()
    assert (run / "verl_metrics.1.jsonl").is_file()  # the first launch's metrics are kept


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(TRAIN_TIMEOUT + 300)
def test_one_grpo_step_of_the_real_model_on_verls_trainer(tmp_path, smollm2):
    """SmolLM2 through ``--backend verl`` on CPU: one GRPO step (a group of 2 episodes of 2 turns)
    samples with the real model, trains its weights (full fine-tune, float32) and writes episodes,
    metrics and a checkpoint. No KL term, as in the real-model recipe: verl starts no reference
    model."""
    from safetensors.torch import load_file

    args = [AGENTGYM, "train", "--backend", "verl", "--device", "cpu", "name=real", f"runs_dir={tmp_path}",
            f"model={smollm2}", "envs=babyai", "steps=1", "tasks_per_step=1", "n=2", "train_limit=20",
            "val_before=false", "val_limit=1", "val_n=1", "val_max_turns=1", "max_context=2048",
            "max_new_tokens=24", "format_hint=true", "lr=1e-5", "kl_coef=0", "horizon=fixed",
            "horizon_params={horizon: 2}"]  # fmt: skip
    out = subprocess.run(args, capture_output=True, text=True, timeout=TRAIN_TIMEOUT)
    assert out.returncode == 0, (out.stdout + out.stderr)[-5000:]
    # the usage line is printed and its tree held the model (sdpa and checkpointing on CPU keep the
    # update within a laptop: the figure and its 16 GB budget are bench/speed/verl_step.py's)
    usage = re.search(r"peak memory: ([\d.]+) GB", out.stdout)
    assert usage and float(usage.group(1)) > 1, out.stdout[-2000:]
    run = tmp_path / "real"
    episodes = [json.loads(x) for x in (run / "episodes" / "step_000001.jsonl").read_text().splitlines()]
    assert len(episodes) == 2 and all(e["max_turns"] == 2 and e["termination"] != "error" for e in episodes)
    metrics = {
        m["step"]: m["data"] for m in map(json.loads, (run / "verl_metrics.jsonl").read_text().splitlines())
    }
    assert "agentgym/success" in metrics[1] and metrics[1]["timing_s/step"] > 0
    trained = torch.load(run / "checkpoints" / "global_step_1" / "actor" / "model_world_size_1_rank_0.pt",
                         weights_only=False)  # fmt: skip
    start = load_file(smollm2 / "model.safetensors")
    full = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in trained.items()}
    common = [k for k in start if k in full]
    assert len(common) == len(start), sorted(set(start) - set(full))[:5]  # the checkpoint holds every weight
    changed = [k for k in common if not torch.equal(start[k], full[k].to(start[k].dtype))]
    assert changed, "no weight of the real model changed after a GRPO step on verl"
