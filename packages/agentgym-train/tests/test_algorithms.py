"""Advantage estimators, KL estimators, the clipped loss and aggregation: hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from agentgym_train.rl import algorithms as A
from agentgym_train.rl.specs import AlgorithmSpec, algorithms, get_algorithm

from agentgym import hookimpl
from agentgym.errors import AgentGymError, PluginError
from agentgym.plugins import get_registry, reset_registry


def test_reward_sits_on_the_last_sampled_token():
    r = A.token_rewards(torch.tensor([1.0, 0.5]), [3, 1], 5)
    assert r.tolist() == [[0, 0, 0, 1.0, 0], [0, 0.5, 0, 0, 0]]


def test_grpo_normalises_within_groups():
    mask = torch.tensor([[0, 1, 1], [0, 1, 0], [1, 1, 0], [1, 0, 0]], dtype=torch.float32)
    rewards = A.token_rewards(torch.tensor([1.0, 0.0, 1.0, 1.0]), [2, 1, 1, 0], 3)
    adv, _ = A.grpo_advantages(rewards, mask, ["a", "a", "b", "b"])
    s = 1 / math.sqrt(2)  # (1 - 0.5) / std([1, 0]) with the unbiased std 0.7071
    assert adv[0].tolist() == pytest.approx([0, s, s], abs=1e-5)
    assert adv[1].tolist() == pytest.approx([0, -s, 0], abs=1e-5)
    assert adv[2:].abs().max() == 0  # identical scores: no signal
    adv_nostd, _ = A.grpo_advantages(rewards, mask, ["a", "a", "b", "b"], norm_by_std=False)
    assert adv_nostd[0, 1] == pytest.approx(0.5)


def test_rloo_is_score_minus_mean_of_the_others():
    mask = torch.ones(4, 2)
    rewards = A.token_rewards(torch.tensor([1.0, 0.0, 0.0, 0.7]), [1, 1, 1, 1], 2)
    adv, _ = A.rloo_advantages(rewards, mask, [0, 0, 0, 1])
    assert adv[:3, 0].tolist() == pytest.approx([1.0, -0.5, -0.5])
    assert adv[3, 0] == pytest.approx(0.7)  # a group of one keeps its score (as verl)


def test_reinforce_pp_returns_skip_observation_tokens():
    mask = torch.tensor([[0, 1, 1, 0, 1]], dtype=torch.float32)
    rewards = A.token_rewards(torch.tensor([1.0]), [4], 5)
    adv, returns = A.reinforce_pp_advantages(rewards, mask, gamma=0.5)
    # t=4: 1; t=2: 0.5 * 1; t=1: 0.25 — the observation token at t=3 neither resets nor discounts
    assert returns[0].tolist() == pytest.approx([0, 0.25, 0.5, 0, 1.0])
    sampled = adv[mask > 0]
    assert sampled.mean() == pytest.approx(0, abs=1e-5) and sampled.std() == pytest.approx(1, abs=1e-3)
    assert adv[mask == 0].abs().max() == 0


def test_reinforce_pp_baseline_centres_on_the_group_then_whitens():
    mask = torch.tensor([[1, 1], [1, 0], [1, 1]], dtype=torch.float32)
    rewards = A.token_rewards(torch.tensor([1.0, 0.0, 0.5]), [1, 0, 1], 2)
    adv, _ = A.reinforce_pp_baseline_advantages(rewards, mask, [0, 0, 1])
    # centred: [0.5, 0.5], [-0.5], [0 (alone, minus nothing: 0.5 -> kept 0.5)]
    assert adv[0, 0] == pytest.approx(adv[0, 1]) and adv[0, 0] > 0 > adv[1, 0]
    assert adv[mask > 0].mean() == pytest.approx(0, abs=1e-5)


def test_gae_with_gamma_lambda_one_is_return_minus_value_over_sampled_tokens():
    mask = torch.tensor([[1, 0, 1]], dtype=torch.float32)
    values = torch.tensor([[0.2, 9.0, 0.5]])  # the observation token's value must not leak in
    rewards = A.token_rewards(torch.tensor([1.0]), [2], 3)
    raw_adv = torch.tensor([[0.8, 0.0, 0.5]])  # R - v_t
    adv, returns = A.gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    assert returns[0].tolist() == pytest.approx([1.0, 0.0, 1.0])
    assert adv[0].tolist() == pytest.approx(A.masked_whiten(raw_adv, mask)[0].mul(mask[0]).tolist(), abs=1e-5)


def test_kl_estimators():
    lp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert A.kl_penalty(lp, ref, "k1").item() == pytest.approx(math.log(2))
    assert A.kl_penalty(lp, ref, "k2").item() == pytest.approx(0.5 * math.log(2) ** 2)
    assert A.kl_penalty(lp, ref, "low_var_kl").item() == pytest.approx(0.5 - math.log(0.5) - 1)
    assert A.kl_penalty(lp, ref, "abs").item() == pytest.approx(math.log(2))
    with pytest.raises(AgentGymError, match="unknown KL estimator"):
        A.kl_penalty(lp, ref, "k9")


def test_clipped_surrogate_and_dual_clip():
    old = torch.zeros(1, 2)
    new = torch.full((1, 2), 0.5)  # ratio e^0.5 = 1.6487
    mask = torch.ones(1, 2)
    loss, stats = A.policy_loss(
        old, new, torch.tensor([[1.0, -1.0]]), mask, clip_ratio=0.2, agg="seq-mean-token-sum"
    )
    # + advantage: clipped at 1.2 -> -1.2; - advantage: max(1.6487, 1.2) = 1.6487, under the dual clip 3
    assert loss.item() == pytest.approx(-1.2 + math.exp(0.5), abs=1e-4)
    assert stats["clip_frac"].item() == pytest.approx(0.5)
    far = torch.full((1, 1), 2.0)  # ratio 7.39 with a negative advantage: dual clip caps at 3
    loss, _ = A.policy_loss(torch.zeros(1, 1), far, torch.tensor([[-1.0]]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(3.0)


def test_loss_aggregation_modes_and_exact_micro_batches():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]], dtype=torch.float32)
    assert A.agg_loss(loss, mask, "token-mean").item() == pytest.approx(2.5)
    assert A.agg_loss(loss, mask, "seq-mean-token-sum").item() == pytest.approx(5.0)
    assert A.agg_loss(loss, mask, "seq-mean-token-mean").item() == pytest.approx(3.0)
    for mode in A.AGG_MODES:  # micro-batches normalised by the whole batch add up to the batch's loss
        parts = sum(
            A.agg_loss(loss[i : i + 1], mask[i : i + 1], mode, tokens=4.0, seqs=2.0).item() for i in range(2)
        )
        assert parts == pytest.approx(A.agg_loss(loss, mask, mode).item())
    with pytest.raises(AgentGymError, match="unknown loss aggregation"):
        A.agg_loss(loss, mask, "max")


def test_registry_has_the_builtin_algorithms_and_names_unknown_ones():
    assert {"gae", "grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"} <= set(algorithms())
    assert get_algorithm("gae").needs_critic and get_algorithm("grpo").needs_groups
    with pytest.raises(AgentGymError, match="unknown algorithm 'ppo2'"):
        get_algorithm("ppo2")


class BrokenPlugin:
    @hookimpl
    def agentgym_algorithms(self):
        raise RuntimeError("cannot build my specs")


class TwinPlugin:
    @hookimpl
    def agentgym_algorithms(self):
        return [AlgorithmSpec("grpo", "agentgym_train.rl.algorithms:rloo")]


def test_algorithm_plugins_are_read_through_the_registry(monkeypatch):
    """A plugin whose hook raises is reported and left out (the built-ins still work; the suite's
    strict mode would raise instead); a name two plugins register fails naming both."""
    reset_registry()  # a registry of its own: the problem it reports stays out of other tests
    registry = get_registry()
    monkeypatch.setattr(registry, "strict", False)
    registry.pm.register(BrokenPlugin(), name="broken-algorithms")
    try:
        assert get_algorithm("grpo").estimate == "agentgym_train.rl.algorithms:grpo"
        assert any("cannot build my specs" in p.reason for p in registry.all_problems())
    finally:
        registry.pm.unregister(name="broken-algorithms")
    registry.pm.register(TwinPlugin(), name="twin-algorithms")
    try:
        with pytest.raises(
            PluginError, match="'grpo' is registered by plugin 'train'.* and by 'twin-algorithms'"
        ):
            algorithms()
    finally:
        reset_registry()


@pytest.mark.parametrize("name", ["gae", "grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"])
def test_loss_decreases_on_a_fixed_batch(name, tiny_model):
    """A few updates on one batch lower the clipped surrogate measured against the batch's
    original log-probabilities (and the critic's loss for gae)."""
    from agentgym_train.models.logprobs import token_logprobs
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    spec = get_algorithm(name)
    B, T = 4, 12
    ids = torch.randint(3, model.config.vocab_size, (B, T))
    mask = torch.zeros(B, T)
    mask[:, 4:7] = 1
    mask[:, 9:12] = 1
    scores = torch.tensor([1.0, 0.0, 1.0, 0.0])
    rewards = A.token_rewards(scores, [11] * B, T)
    head = torch.nn.Linear(model.config.hidden_size, 1)
    params = list(model.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-3)
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
        old_lp = token_logprobs(out.logits, ids)
        old_v = head(out.hidden_states[-1]).squeeze(-1)
    adv, returns = spec.estimator()(A.Batch(rewards, mask, [0, 0, 1, 1], old_v), **spec.params)
    assert adv.abs().sum() > 0

    def losses() -> tuple[torch.Tensor, torch.Tensor]:
        out = model(input_ids=ids, output_hidden_states=True)
        pg, _ = A.policy_loss(old_lp, token_logprobs(out.logits, ids), adv, mask)
        vl = A.value_loss(head(out.hidden_states[-1]).squeeze(-1), old_v, returns, mask, clip=10.0)
        return pg, vl

    pg0, vl0 = (x.item() for x in losses())
    for _ in range(5):
        pg, vl = losses()
        (pg + (vl if spec.needs_critic else 0)).backward()
        opt.step()
        opt.zero_grad()
    pg1, vl1 = (x.item() for x in losses())
    assert pg1 < pg0 - 1e-4
    if spec.needs_critic:
        assert vl1 < vl0
