"""Horizon schedules, the trainer's config, micro-batches, and exact resume on a real tiny run."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
import time

import pytest
import torch
from agentgym_train.models.logprobs import micro_batches
from agentgym_train.rl.config import ConfigError, TrainConfig
from agentgym_train.rl.horizon import make_schedule
from agentgym_train.rl.step import learn, mini_batches
from agentgym_train.rl.trainer import TIMING_KEYS, Trainer, cpu_seconds

from agentgym.errors import AgentGymError
from agentgym.trajectory import read_episodes


def test_scaling_inter_follows_the_reference_stages():
    s = make_schedule("scaling_inter", rounds=[6, 13, 20], every=2)
    assert [s(step) for step in range(1, 9)] == [6, 6, 13, 13, 20, 20, 20, 20]
    # a resumed run needs no state: the stage is a function of the step (reference: min(step // N, len - 1)
    # for the steps already done)
    assert all(s.stage(done + 1) == min(done // 2, 2) for done in range(10))


def test_adaptive_moves_on_when_truncations_fall_and_its_state_round_trips():
    s = make_schedule("adaptive", rounds=[4, 8], threshold=0.3, min_steps=2)
    s.update(1, {"truncation_rate": 0.1})
    assert s(2) == 4  # min_steps not reached
    s.update(2, {"truncation_rate": 0.5})
    assert s(3) == 4  # too many truncations
    s.update(3, {"truncation_rate": 0.2})
    assert s(4) == 8
    t = make_schedule("adaptive", rounds=[4, 8], threshold=0.3, min_steps=2)
    t.load_state_dict(s.state_dict())
    assert t(5) == 8


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"rounds": [13, 6]}, "must not decrease"),
        ({"rounds": []}, "non-empty"),
        ({"every": 0}, "every must be >= 1"),
        ({"bogus": 1}, "unexpected keyword"),
    ],
)
def test_bad_schedules_say_why(params, message):
    with pytest.raises(AgentGymError, match=message):
        make_schedule("scaling_inter", **params)


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="unknown config key 'stpes' \\(did you mean 'steps'\\?\\)"):
        TrainConfig.load(None, ["stpes=3"])
    with pytest.raises(ConfigError, match="lr must be float"):
        TrainConfig.load(None, ["lr=fast"])
    with pytest.raises(ConfigError, match="grpo compares samples of one task: n must be >= 2"):
        TrainConfig.load(None, ["n=1"])
    with pytest.raises(AgentGymError, match="unknown algorithm 'ppo2'"):
        TrainConfig.load(None, ["algorithm=ppo2"])
    with pytest.raises(ConfigError, match="has no split 'dev'"):
        TrainConfig.load(None, ["val_split=dev"])
    cfg = TrainConfig.load(
        None, ["envs=babyai,guess", "lr=1e-6", "horizon_params={rounds: [2, 4], every: 3}"]
    )
    assert cfg.envs == ["babyai", "guess"] and cfg.lr == 1e-6 and cfg.horizon_params["every"] == 3


def test_config_file_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("steps: 7\nalgorithm: rloo\n")
    cfg = TrainConfig.load(path, ["steps=9"])
    assert (cfg.steps, cfg.algorithm) == (9, "rloo")


def test_micro_batches_respect_the_token_budget():
    assert micro_batches([10, 10, 30, 5], 40) == [[0, 1], [2], [3]]
    assert micro_batches([100], 10) == [[0]]  # a row longer than the budget still runs, alone


def _config(tiny_model, tmp_path, steps, **extra):
    overrides = {
        "name": "r",
        "runs_dir": str(tmp_path),
        "model": str(tiny_model),
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
        **extra,
    }
    return TrainConfig.from_dict(overrides)


def _train(cfg):
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        report = trainer.train()
    finally:
        trainer.close()
    return trainer, report


def _rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _metrics(run):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in _rows(run)]


def test_cpu_seconds_count_every_thread_and_children_that_ended():
    def burn(seconds):  # this thread's own CPU seconds
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    before = cpu_seconds()
    thread = threading.Thread(target=burn, args=(0.3,))
    thread.start()
    thread.join()
    in_threads = cpu_seconds() - before
    code = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert in_threads >= 0.25
    assert cpu_seconds() - before - in_threads >= 0.45  # the child's, once it ended


@pytest.mark.slow
def test_two_steps_then_resume_equals_four_straight(tiny_model, tmp_path):
    straight, _ = _train(_config(tiny_model, tmp_path / "a", 4))
    _, first = _train(_config(tiny_model, tmp_path / "b", 2))
    # as a launch killed after step 3's metrics line, before its checkpoint, mid-way through a line
    with open(tmp_path / "b" / "r" / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "loss": 0.5}\n{"step": 4, "lo')
    resumed, report = _train(_config(tiny_model, tmp_path / "b", 4))
    a, b = _metrics(tmp_path / "a" / "r"), _metrics(tmp_path / "b" / "r")
    assert [m["step"] for m in b] == [1, 2, 3, 4]
    assert [m["horizon"] for m in a] == [2, 2, 3, 3]  # the schedule advanced as configured
    assert a == b
    for (name, p), q in zip(
        straight.learner.model.state_dict().items(), resumed.learner.model.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    run = tmp_path / "b" / "r"
    assert {p.name for p in (run / "plots").iterdir()} == {"return.png", "success.png", "horizon.png"}
    assert (run / "config.yaml").is_file() and (run / "model" / "config.json").is_file()
    assert [p.name for p in sorted((run / "checkpoints").iterdir())] == ["step_000002", "step_000004"]
    assert report["steps"] == 4 and report["validation"][0]["label"] == "before"
    assert sorted(p.name for p in (run / "episodes").glob("step_*.jsonl")) == [
        f"step_00000{i}.jsonl" for i in range(1, 5)
    ]
    # the report's time and peak are the run's over its launches, also when a launch only reads a
    # finished run back (a report comes a model save after the last checkpoint: within 1 s)
    assert report["wall_s"] >= first["wall_s"] - 1 + sum(r["time_step"] for r in _rows(run)[2:])
    # a step's CPU seconds: some, and no more than every core for its wall seconds
    assert all(0 < r["cpu_step"] <= r["time_step"] * os.cpu_count() + 0.1 for r in _rows(run))
    _, again = _train(_config(tiny_model, tmp_path / "b", 4))
    assert again["validation"] == report["validation"] and again["wall_s"] >= report["wall_s"] - 1
    assert again["peak_rss_gb"] >= max(first["peak_rss_gb"], report["peak_rss_gb"]) - 0.01


@pytest.mark.slow
def test_training_on_env_servers_equals_training_on_in_process_envs(tiny_model, tmp_path):
    """``env_urls``: the native trainer plays its episodes (and its validations) as sessions on two
    real loopback servers. Every episode draws from its own seeded stream (``episode_seeds``), so
    on the same tasks the run equals an in-process one: the episodes' tokens and rewards, every
    step's metrics, the validation scores and the weights."""
    from agentgym.server.background import serve_in_thread

    local, local_report = _train(_config(tiny_model, tmp_path / "local", 2))
    with serve_in_thread(["guess"]) as one, serve_in_thread(["guess"]) as two:
        remote, remote_report = _train(_config(tiny_model, tmp_path / "remote", 2, env_urls=[one, two]))
        assert type(remote.backends["guess"]).__name__ == "RemoteEnvs"
    runs = tmp_path / "local" / "r", tmp_path / "remote" / "r"
    assert _metrics(runs[0]) == _metrics(runs[1])

    def untimed(value):  # seconds (``wall_s``, ``generate_s``...) are what a second run changes
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items() if not k.endswith("_s")}
        return [untimed(v) for v in value] if isinstance(value, list) else value

    for here, there in zip(local_report["validation"], remote_report["validation"], strict=True):
        here, there = untimed(here["envs"]["guess"]), untimed(there["envs"]["guess"])
        differ = {k for k, v in here.items() if v != there.get(k)}
        assert differ == {"max_instances", "instances_made"}  # what in-process instances report

    def played(run):
        return [
            (e.task_id, e.sample, e.return_, e.tokens.ids, [(t.action, t.observation) for t in e.steps])
            for path in sorted((run / "episodes").glob("step_*.jsonl"))
            for e in read_episodes(path)
        ]

    assert played(runs[0]) == played(runs[1]) and len(played(runs[0])) == 2 * 2 * 2
    for (name, p), q in zip(
        local.learner.model.state_dict().items(), remote.learner.model.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name


@pytest.mark.slow
def test_a_tokened_run_writes_its_token_nowhere(tiny_model, tmp_path):
    """``agentgym train`` on a server that needs a token: the first launch reads it from
    ``$AGENTGYM_TOKEN``, the resumed one from ``env_token_file``; both train, and the token is in no
    file under the run directory and in nothing either printed."""
    from agentgym.server.background import serve_in_thread

    token = "tok-3e1f9a77c0d2-TRAINSECRET"
    secret = tmp_path / "secret" / "token"
    secret.parent.mkdir()
    secret.write_text(token + "\n")
    base = {k: v for k, v in os.environ.items() if k != "AGENTGYM_TOKEN"}
    runs = tmp_path / "runs"
    outputs = []
    with serve_in_thread(["guess"], token=token) as url:
        for steps, how, env in (
            (1, [], {**base, "AGENTGYM_TOKEN": token}),
            (2, [f"env_token_file={secret}"], base),
        ):
            args = [sys.executable, "-m", "agentgym", "train", "name=r", f"runs_dir={runs}", f"model={tiny_model}", "envs=guess",
                    f"steps={steps}", "tasks_per_step=2", "n=2", "max_new_tokens=8", "val_limit=2", "val_n=1",
                    "micro_batch_tokens=256", "progress=false", "--env-url", url, *how]  # fmt: skip
            out = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
            assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
            outputs.append(out.stdout + out.stderr)
    assert "guess: on 1 env server(s)" in outputs[0], outputs[0][-2000:]
    run = runs / "r"
    assert [m["step"] for m in _rows(run)] == [1, 2]
    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) > 10 and str(secret) in (run / "config.yaml").read_text()
    assert [p for p in files if token.encode() in p.read_bytes()] == []
    assert all(token not in text for text in outputs)


@pytest.mark.slow
def test_a_resumed_run_draws_the_difficulty_samplers_tasks_as_a_straight_one(tiny_model, tmp_path):
    """The sampler's rates and random stream are in the checkpoint: two steps, then a resume to
    four, play the tasks four straight steps play, and log the same estimates."""
    extra = {"task_sampler": "difficulty", "task_sampler_params": {"explore": 0.2}, "save_every": 2}
    _train(_config(tiny_model, tmp_path / "a", 4, **extra))
    _train(_config(tiny_model, tmp_path / "b", 2, **extra))
    _train(_config(tiny_model, tmp_path / "b", 4, **extra))
    a, b = _metrics(tmp_path / "a" / "r"), _metrics(tmp_path / "b" / "r")
    assert a == b and all(0 <= m["task_pass_rate_est"] <= 1 for m in a)
    assert all(0 <= m["zero_variance_groups"] <= 1 for m in a)

    def tasks(run):
        return [
            [(ep.env, ep.task_id) for ep in read_episodes(run / "episodes" / f"step_00000{i}.jsonl")]
            for i in range(1, 5)
        ]

    assert tasks(tmp_path / "a" / "r") == tasks(tmp_path / "b" / "r")


def test_train_cli_bad_input_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "agentgym", "train", "stpes=3"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode != 0
    assert "unknown config key 'stpes'" in r.stderr and "Traceback" not in r.stderr


def test_tasks_are_drawn_from_every_env_and_category_filter_applies():
    from agentgym_train.rollout.task_sampling import TaskPool, UniformSampler
    from agentgym_train.rollout.tasks import category_ids

    pool = TaskPool.of_split(["babyai", "guess"], "train", categories=["GoToRedBall", "small"])
    sampler = UniformSampler(pool, seed=0)
    draws = sampler.draw(200)
    assert {env for env, _ in draws} == {"babyai", "guess"}
    assert all(t % 40 == 1 for env, t in draws if env == "babyai")  # GoToRedBall is level 1 of 40
    assert category_ids("babyai", "train", ["GoToRedBall"], 3) == [1, 41, 81]


@pytest.mark.slow
def test_lora_trains_adapters_only_with_the_base_as_reference(tiny_model, tmp_path):
    cfg = _config(tiny_model, tmp_path, 1, lora=True, lora_r=4, kl_coef=0.01, val_limit=1)
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        before = {k: v.clone() for k, v in trainer.learner.model.state_dict().items()}
        trainer.train()
    finally:
        trainer.close()
    after = trainer.learner.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed)
    assert trainer.learner.ref is None  # the reference is the base model with the adapters off
    # the saved model is the merged one, a plain directory every command loads
    saved = trainer.run_dir / "model"
    assert (saved / "config.json").is_file() and not (saved / "adapter_config.json").exists()


@pytest.mark.slow
def test_mini_batches_make_one_optimizer_step_each_over_every_row_once(tiny_model, tmp_path):
    cfg = _config(tiny_model, tmp_path, 1, mini_batches=2, ppo_epochs=2, val_limit=1)
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        parts = mini_batches(cfg.mini_batches, 4)
        assert len(parts) == 2 and sorted(r for p in parts for r in p) == [0, 1, 2, 3]
        trainer.train()
        states = trainer.learner.optimizer.state_dict()["state"].values()
        assert {int(s["step"]) for s in states} == {4}  # 2 epochs x 2 mini-batches
    finally:
        trainer.close()
    with pytest.raises(ConfigError, match="mini_batches \\(5\\) cannot exceed the episodes per step"):
        _config(tiny_model, tmp_path, 1, mini_batches=5)


def test_episode_score_is_success_return_or_a_reward_transform():
    from agentgym_train.rl.batch import episode_score

    from agentgym.trajectory import Episode, Step

    steps = [
        Step(raw_output="Action: jump", action="jump", info={"valid_action": False}),
        Step(raw_output="no action line", action=None),
        Step(raw_output="Action: go to red ball 1", action="go to red ball 1", reward=0.8, terminated=True),
    ]
    ep = Episode(env="babyai", task_id=1, steps=steps, success=True, num_turns=3, **{"return": 0.8})
    assert episode_score(ep, "success") == 1.0
    assert episode_score(ep, "return") == pytest.approx(0.8)
    # the return less 0.1 for the invalid action and 0.1 for the output that did not parse
    assert episode_score(ep, "format_penalty", {"penalty": 0.1}) == pytest.approx(0.6)
    assert episode_score(ep, "step_penalty", {"penalty": 0.05}) == pytest.approx(0.65)
    with pytest.raises(ConfigError, match="reward must be one of return, success, .*format_penalty"):
        TrainConfig.load(None, ["reward=shaped"])
    with pytest.raises(ConfigError, match="reward_params apply to a reward transform"):
        TrainConfig.load(None, ["reward=success", "reward_params={penalty: 0.1}"])


def test_invalid_turn_mask_marks_the_sampled_tokens_of_invalid_turns_only():
    from agentgym_train.rl.batch import invalid_turn_mask, turn_spans

    from agentgym.trajectory import Episode, Step, Tokens

    # prompt (3) | turn 1 (2 sampled) | observation (2) | turn 2 (3) | observation (1) | turn 3 (1)
    loss_mask = [0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1]
    assert turn_spans(loss_mask) == [(3, 5), (7, 10), (11, 12)]
    steps = [
        Step(action="go to red ball 1", info={"valid_action": False}),
        Step(action="turn left"),
        Step(action=None),  # did not parse
    ]
    tokens = Tokens(ids=list(range(12)), loss_mask=loss_mask, logprobs=[0.0] * 12, reward_index=11)
    ep = Episode(env="babyai", task_id=0, steps=steps, tokens=tokens, num_turns=3)
    assert invalid_turn_mask(ep, 14).tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0]
    with pytest.raises(ConfigError, match="invalid_action_penalty must be >= 0"):
        TrainConfig.load(None, ["invalid_action_penalty=-1"])


@pytest.mark.slow
def test_invalid_action_penalty_pushes_down_invalid_turns_and_nothing_when_off(tiny_model, tmp_path):
    """All episodes failed, so GRPO's advantages are 0: without the penalty an update leaves the
    weights as they are; with it, the invalid turns' tokens lose probability."""
    import torch
    from agentgym_train.models.logprobs import token_logprobs
    from agentgym_train.rl.batch import invalid_turn_mask

    def invalid_logprob(trainer, episodes):
        total = 0.0
        with torch.no_grad():
            for ep in episodes:
                ids = torch.tensor([ep.tokens.ids])
                lp = token_logprobs(trainer.learner.model(input_ids=ids).logits, ids)[0]
                total += float((lp * invalid_turn_mask(ep, len(ep.tokens.ids))).sum())
        return total

    results = {}
    for penalty in (0.0, 1.0):
        cfg = _config(
            tiny_model,
            tmp_path,
            1,
            name=f"p{penalty}",
            reward="success",
            kl_coef=0.0,
            entropy_coef=0.0,
            invalid_action_penalty=penalty,
        )
        trainer = Trainer(cfg)
        trainer.setup()
        try:
            torch.manual_seed(0)
            episodes, _ = trainer.groups.rollout(trainer.step, 3)
            for ep in episodes:
                ep.success = False
            assert any(not st.valid_action for ep in episodes for st in ep.steps)
            weights = [p.detach().clone() for p in trainer.learner.params]
            before = invalid_logprob(trainer, episodes)
            stats = learn(episodes, trainer.learner, trainer.estimator, trainer.cfg)
            after = invalid_logprob(trainer, episodes)
            moved = max(
                float((p.detach() - w).abs().max())
                for p, w in zip(trainer.learner.params, weights, strict=True)
            )
            results[penalty] = (before, after, moved, stats["invalid_turns"])
        finally:
            trainer.close()
    assert results[0.0][2] == 0.0  # zero advantages everywhere: no change
    before, after, moved, invalid = results[1.0]
    assert moved > 0 and after < before and 0 < invalid <= 1


@pytest.mark.slow
def test_a_run_that_starts_over_does_not_append_to_a_stale_log(tiny_model, tmp_path):
    # what a run killed before its first checkpoint leaves behind
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "success": 0.5}) + "\n")
    _train(_config(tiny_model, tmp_path, 1, val_limit=1))
    assert [r["step"] for r in _metrics(run)] == [1] and "horizon" in _metrics(run)[0]


def test_logprobs_of_sampled_tokens_only_equal_the_full_forward_and_its_gradient(tiny_model, tmp_path):
    """The trainer projects to the vocabulary only where tokens were sampled: there the
    log-probabilities, the entropies and the gradient of a loss over them equal those of the whole
    forward pass; elsewhere they are zero."""
    import torch
    from agentgym_train.models.logprobs import entropy_from_logits, pad_rows, token_logprobs

    trainer = Trainer(_config(tiny_model, tmp_path, 1, kl_coef=0.0))
    trainer.setup()
    try:
        torch.manual_seed(0)
        episodes, _ = trainer.groups.rollout(trainer.step, 3)
        rows = [ep for ep in episodes if ep.tokens][:3]
        ids, mask = pad_rows([ep.tokens.ids for ep in rows], masks=[ep.tokens.loss_mask for ep in rows])
        assert 0 < mask.sum() < mask.numel() / 2  # sampled tokens are a minority

        def grads(loss):
            trainer.learner.model.zero_grad(set_to_none=True)
            loss.backward()
            return [p.grad.clone() for p in trainer.learner.params]

        lp, ent, _ = trainer.learner.logprobs(ids, mask, entropy=True)
        assert ((lp != 0) <= (mask > 0)).all() and ((ent != 0) <= (mask > 0)).all()
        ours = grads(((lp + 0.1 * ent) * mask).sum())
        logits = trainer.learner.model(input_ids=ids).logits
        full_lp = token_logprobs(logits, ids) * mask
        full_ent = torch.nn.functional.pad(entropy_from_logits(logits[:, :-1]), (1, 0)) * mask
        assert torch.allclose(lp, full_lp, atol=1e-5) and torch.allclose(ent, full_ent, atol=1e-5)
        full = grads(((full_lp + 0.1 * full_ent) * mask).sum())
        for a, b in zip(ours, full, strict=True):
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    finally:
        trainer.close()


def test_the_forward_runs_on_widths_rounded_up_and_returns_the_rows_own(tiny_model, tmp_path):
    """oneDNN builds (and keeps) a kernel per matrix shape: the decoder and the output layer see
    widths and rows rounded up to SHAPE_MULTIPLE, the caller gets its own shape back."""
    from agentgym_train.models.logprobs import SHAPE_MULTIPLE, pad_rows

    trainer = Trainer(_config(tiny_model, tmp_path, 1, kl_coef=0.0))
    trainer.setup()
    try:
        model, seen = trainer.learner.model, []
        hooks = [
            model.get_decoder().register_forward_pre_hook(
                lambda _m, _a, kw: seen.append(("decoder", kw["input_ids"].shape[1])), with_kwargs=True
            ),
            model.get_output_embeddings().register_forward_pre_hook(
                lambda _m, a: seen.append(("head", a[0].shape[0]))
            ),
        ]
        rows = [[5] * 70, [6] * 41]
        masks = [[0] * 60 + [1] * 10, [0] * 30 + [1] * 11]
        ids, mask = pad_rows(rows, masks=masks)
        lp, ent, _ = trainer.learner.logprobs(ids, mask, entropy=True)
        for hook in hooks:
            hook.remove()
        assert lp.shape == ent.shape == (2, 70) and ((lp != 0) <= (mask > 0)).all()
        assert seen and all(n % SHAPE_MULTIPLE == 0 for _, n in seen), seen
        assert {part for part, _ in seen} == {"decoder", "head"}
    finally:
        trainer.close()


def test_a_row_ends_at_its_last_sampled_token_with_the_same_log_probs(tiny_model, tmp_path):
    """The last observation follows the last reply: the update leaves it out of the row, and the
    sampled tokens' log-probabilities are those of the whole episode (causal attention)."""
    from agentgym_train.models.logprobs import pad_rows
    from agentgym_train.rl.batch import TokenBatch

    trainer = Trainer(_config(tiny_model, tmp_path, 1, kl_coef=0.0))
    trainer.setup()
    try:
        episodes, _ = trainer.groups.rollout(trainer.step, 3)
        for ep in episodes[::2]:  # as an episode whose last observation is in its tokens
            ep.tokens.ids += ep.tokens.ids[:7]
            ep.tokens.loss_mask += [0] * 7
        batch = TokenBatch.from_episodes(episodes, "return")
        assert batch.lengths == [ep.tokens.reward_index + 1 for ep in batch.episodes]
        assert sum(len(ep.tokens.ids) for ep in batch.episodes) == sum(batch.lengths) + 7 * len(episodes[::2])
        full_ids, full_mask = pad_rows(
            [ep.tokens.ids for ep in batch.episodes], masks=[ep.tokens.loss_mask for ep in batch.episodes]
        )
        assert full_mask.sum() == batch.mask.sum()  # no sampled token left out
        with torch.no_grad():
            cut, _, _ = trainer.learner.logprobs(batch.ids, batch.mask)
            whole, _, _ = trainer.learner.logprobs(full_ids, full_mask)
        assert torch.allclose(cut, whole[:, : batch.width], atol=1e-5)
    finally:
        trainer.close()


def test_rows_that_share_a_prompt_run_it_once_and_get_the_same_gradient(tiny_model, tmp_path):
    """The samples of a task open with one prompt: the update runs it once a group, keeps its
    keys and values, and runs each row from there (``share_prompts``). The gradient, entropy
    term included, is the one of the rows run whole; micro-batches smaller than a group too."""
    from agentgym_train.rl.batch import TokenBatch
    from agentgym_train.rl.shared_prefix import prompt_groups

    cfg = _config(tiny_model, tmp_path, 1, n=3, kl_coef=0.0, entropy_coef=0.01, reward="return")
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        torch.manual_seed(0)
        episodes, _ = trainer.groups.rollout(trainer.step, 3)
        for ep in episodes:
            ep.return_ = float(ep.sample)  # every group informative
        batch = TokenBatch.from_episodes(episodes, "return")
        groups = prompt_groups(batch.ids, batch.mask, range(len(batch.lengths)))
        # the guessing game opens every task with one prompt: all six rows share it
        assert [(start > 0, len(rows)) for start, rows in groups] == [(True, 6)]
        start, rows = groups[0]
        assert all(torch.equal(batch.ids[i, :start], batch.ids[rows[0], :start]) for i in rows)
        assert all(batch.mask[i, : start + 1].sum() == 0 for i in rows)  # no sampled token in it
        learner = trainer.learner
        state = copy.deepcopy(learner.state_dict())
        grads = {}
        for key, share, budget in [("shared", True, 256), ("whole", False, 256), ("shared, 1 row", True, 1)]:
            # the gradients the optimizer would step on, kept instead
            learner.optimizer.step = lambda key=key: grads.setdefault(
                key, [p.grad.clone() for p in learner.params]
            )
            learner.load_state_dict(copy.deepcopy(state))
            cfg.share_prompts, cfg.micro_batch_tokens = share, budget
            assert learner.shares_prompts() is share
            learn(episodes, trainer.learner, trainer.estimator, trainer.cfg)
        for key in ("shared, 1 row", "whole"):
            for a, b in zip(grads["shared"], grads[key], strict=True):
                assert torch.allclose(a, b, atol=1e-6, rtol=1e-4), key
    finally:
        trainer.close()


def test_resuming_under_other_settings_is_refused_but_a_longer_run_is_not(tiny_model, tmp_path):
    """A checkpointed run continues only under the settings it was trained with: changing the
    learning rate names the key and leaves the run as it was; more steps resume."""
    from agentgym.errors import AgentGymError

    _train(_config(tiny_model, tmp_path, 1, save_every=1))
    run = tmp_path / "r"
    saved = (run / "config.yaml").read_text()
    with pytest.raises(AgentGymError, match=r"lr: 0\.001 -> 0\.002"):
        Trainer(_config(tiny_model, tmp_path, 1, save_every=1, lr=2e-3)).setup()
    assert (run / "config.yaml").read_text() == saved
    trainer = Trainer(_config(tiny_model, tmp_path, 2, save_every=1))
    trainer.setup()
    try:
        assert trainer.step == 1  # resumed
    finally:
        trainer.close()
    fresh = Trainer(_config(tiny_model, tmp_path, 1, lr=2e-3, resume=False))
    fresh.setup()
    try:
        assert fresh.step == 0
    finally:
        fresh.close()


@pytest.mark.slow
def test_gigpo_trains_the_tiny_model_and_logs_anchor_coverage(tiny_model, tmp_path):
    trainer, report = _train(_config(tiny_model, tmp_path, 2, algorithm="gigpo", n=3, val_limit=1))
    metrics = _metrics(tmp_path / "r")
    assert [m["step"] for m in metrics] == [1, 2] and report["algorithm"] == "gigpo"
    # every episode of a task starts in its one state: at least those turns share anchors
    assert all(0 < m["anchor_coverage/guess"] <= 1 for m in metrics)
    # the untrained model never wins, so the run had nothing to learn from; paid per turn, the
    # same episodes train it: GiGPO's step-level credit alone (every episode scores 1)
    trainer = Trainer(trainer.cfg)
    trainer.setup()
    try:
        episodes, _ = trainer.groups.rollout(trainer.step, 2)
        for ep in episodes:
            for t, st in enumerate(ep.steps):
                st.reward = 1.0 if t == ep.sample % len(ep.steps) else 0.0
            ep.return_ = 1.0
        before = {k: v.clone() for k, v in trainer.learner.model.state_dict().items()}
        stats = learn(episodes, trainer.learner, trainer.estimator, trainer.cfg)
        assert stats["zero_adv_skipped"] == 0.0 and stats["trained_tokens"] > 0
        after = trainer.learner.model.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)
    finally:
        trainer.close()


def test_zero_variance_groups_cost_no_forward_pass(tiny_model, tmp_path):
    """A group whose samples all scored the same (and that no turn-level term moves) adds nothing
    to a loss without KL and entropy terms: it is neither scored nor forwarded nor
    back-propagated, and the step reports its share. With an entropy term it trains."""
    cfg = _config(
        tiny_model, tmp_path, 1, tasks_per_step=3, n=2, kl_coef=0.0, entropy_coef=0.0, reward="return"
    )
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        episodes, _ = trainer.groups.rollout(trainer.step, 3)
        for ep in episodes:  # groups 0 and 1: every sample the same score; group 2: two scores
            ep.return_ = {0: 1.0, 1: 0.0}.get(ep.group, float(ep.sample))
        before = trainer.learner.forward_rows
        stats = learn(episodes, trainer.learner, trainer.estimator, trainer.cfg)
        # group 2's two rows, once: on-policy without a KL term, the update's pass is the only one
        assert trainer.learner.forward_rows - before == 2
        assert stats["zero_adv_skipped"] == pytest.approx(4 / 6, abs=1e-3)
        for ep in episodes:
            ep.return_ = 1.0
        before = trainer.learner.forward_rows
        stats = learn(episodes, trainer.learner, trainer.estimator, trainer.cfg)
        assert trainer.learner.forward_rows == before and stats["zero_adv_skipped"] == 1.0
        assert stats["trained_tokens"] == 0
        trainer.cfg.entropy_coef = 0.001  # the entropy bonus reads every row: all of them train
        stats = learn(episodes, trainer.learner, trainer.estimator, trainer.cfg)
        assert trainer.learner.forward_rows - before == 6 and stats["zero_adv_skipped"] == 0.0
    finally:
        trainer.close()


def test_dynamic_sampling_rolls_out_more_tasks_until_enough_groups_are_informative(tiny_model, tmp_path):
    """The untrained tiny model never wins the guessing game: with the success reward no group is
    informative, so each step rolls out tasks_per_step more tasks, dynamic_sampling_rounds times."""
    cfg = _config(
        tiny_model,
        tmp_path,
        1,
        reward="success",
        dynamic_sampling=True,
        dynamic_sampling_rounds=2,
        val_before=False,
    )
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        episodes, stats, info = trainer.groups.sample(trainer.step, 2)
        informative = trainer.groups.informative_groups(episodes)
        assert info == {
            "sampling_rounds": 1 + 2 * (len(informative) < 2),
            "informative_groups": len(informative),
            "task_pass_rate_est": info["task_pass_rate_est"],  # the sampler's (test_task_sampling)
            "zero_variance_groups": 1 - len(informative) / 6,  # reward=success: flat = uninformative
        }
        assert not informative and len(episodes) == 2 * 2 * 3 == stats.episodes
        # every round's episodes are counted in the step's statistics, by how they ended too
        assert sum(stats.by_termination.values()) == len(episodes)
        assert stats.turns == sum(ep.num_turns for ep in episodes)
        assert sorted({ep.group for ep in episodes}) == list(range(6))  # every draw its own group
    finally:
        trainer.close()
    with pytest.raises(ConfigError, match="dynamic_sampling keeps the groups"):
        TrainConfig.from_dict({"algorithm": "reinforce_pp", "dynamic_sampling": True, "n": 2})


def test_a_run_cut_in_its_last_validation_plays_only_the_rest_when_resumed(tiny_model, tmp_path):
    """Each validation episode is kept as it ends: a run cut in its validation after the last
    step (its checkpoint already written) resumes from that checkpoint and plays only the episodes
    not kept, its validation then the one an uninterrupted run writes. A kept file a launch cannot
    trust (played before this launch trained, or with no checkpoint to check its settings) goes."""
    from agentgym import hookimpl
    from agentgym.plugins import get_registry

    settings = {"val_before": False, "val_limit": 3, "val_n": 2, "val_temperature": 1.0}
    _, whole = _train(_config(tiny_model, tmp_path / "a", 1, **settings))

    class Cut:  # as a kill: the fourth validation episode never ends
        seen = 0

        @hookimpl
        def agentgym_episode_end(self, episode):
            if episode.split == "test":
                Cut.seen += 1
                if Cut.seen == 4:
                    raise KeyboardInterrupt

    registry = get_registry()
    registry.register(Cut(), "cut")
    try:
        with pytest.raises(KeyboardInterrupt):
            _train(_config(tiny_model, tmp_path / "b", 1, **settings))
    finally:
        registry.unregister("cut")
    run = tmp_path / "b" / "r"
    assert len(list(read_episodes(run / "episodes" / "val_step_000001.jsonl.partial"))) == 3
    logged = []
    trainer = Trainer(_config(tiny_model, tmp_path / "b", 1, **settings))
    trainer.log = logged.append
    trainer.setup()
    try:
        report = trainer.train()
    finally:
        trainer.close()
    assert "validation at step 1: 3 episodes read back" in logged
    (after,) = report["validation"]
    assert after["envs"]["guess"]["resumed_episodes"] == 3
    assert after["success"] == whole["validation"][0]["success"]

    def played(path):
        return [(e.task_id, e.sample, [m.content for m in e.messages]) for e in read_episodes(path)]

    name = "val_step_000001.jsonl"
    assert played(run / "episodes" / name) == played(tmp_path / "a" / "r" / "episodes" / name)
    assert not list((run / "episodes").glob("*.partial"))
    # a fresh run (no checkpoint) does not read back what a run of the same name left at step 0
    (tmp_path / "c" / "r" / "episodes").mkdir(parents=True)
    stale = tmp_path / "c" / "r" / "episodes" / "val_step_000000.jsonl.partial"
    stale.write_text((run / "episodes" / name).read_text())
    _, fresh = _train(_config(tiny_model, tmp_path / "c", 1, **{**settings, "val_before": True}))
    assert "resumed_episodes" not in fresh["validation"][0]["envs"]["guess"] and not stale.exists()


def test_the_readme_names_every_setting_a_resumed_run_may_change():
    import re
    from pathlib import Path

    from agentgym_train.models.checkpoint import RESUMABLE_CHANGES

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    listed = re.search(r"may change\s*\((.*?)`checkpoint\.RESUMABLE_CHANGES`\)", readme, re.S)
    assert listed, "the README's list of the settings a resumed run may change"
    # `resume` itself, and verl's section (the verl backend's paragraph says it)
    assert set(re.findall(r"`(\w+)`", listed.group(1))) == RESUMABLE_CHANGES - {"resume", "verl"}


def test_a_run_started_over_leaves_no_checkpoint_a_later_resume_would_load(tiny_model, tmp_path):
    """``resume=false`` over a longer run: the earlier run's checkpoints and episodes go, so that
    the next launch resumes the new run (step 1), not the old one's last step, and the last
    validation on disk is the new run's."""
    _train(_config(tiny_model, tmp_path, 2, save_every=1, val_limit=1))
    _, report = _train(_config(tiny_model, tmp_path, 1, resume=False, val_limit=1))
    assert [p.name for p in (tmp_path / "r" / "checkpoints").iterdir()] == ["step_000001"]
    assert (
        max(p.name for p in (tmp_path / "r" / "episodes").glob("val_step_*.jsonl")) == "val_step_000001.jsonl"
    )
    _, again = _train(_config(tiny_model, tmp_path, 1, val_limit=1))
    assert again["steps"] == 1 and again["validation"] == report["validation"]
