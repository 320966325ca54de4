"""GiGPO (arXiv 2505.10978) on hand-made groups, against the paper's formulas written out the way
its reference implementation (verl-agent, ``gigpo/core_gigpo.py``) lays them out: one record per
turn, an episode-level term per task group (Eq. 3), step groups of equal anchors per task group
(Eq. 6), returns normalised within them (Eq. 5, 7), combined with weight omega (Eq. 8). And the
turns the trainer builds from episodes: anchors, rewards, spans."""

from __future__ import annotations

import statistics

import pytest
import torch
from agentgym_train.rl import algorithms as A
from agentgym_train.rl.specs import get_algorithm

from agentgym.errors import AgentGymError
from agentgym.trajectory import Episode, Message, Step, Tokens

# -- the reference's layout: one record per turn --------------------------------------------------


def reference_gigpo(records, *, gamma, omega, eps=1e-6, norm_by_std=True, step_norm_by_std=False):
    """``records``: dicts with ``task``, ``traj``, ``anchor``, ``reward`` (per turn, in turn
    order within a trajectory) and ``score`` (the trajectory's). Returns one advantage per record."""

    def norm(values, by_std):
        if len(values) == 1:
            return [0.0]
        mean = statistics.fmean(values)
        sd = statistics.stdev(values)
        return [(v - mean) / (sd + eps) if by_std else v - mean for v in values]

    # Eq. 3: one score per trajectory, normalised over the trajectories of one task
    trajs = {}
    for r in records:
        trajs.setdefault(r["task"], {})[r["traj"]] = r["score"]
    episode = {}
    for task, by_traj in trajs.items():
        for traj, a in zip(by_traj, norm(list(by_traj.values()), norm_by_std), strict=True):
            episode[(task, traj)] = a if len(by_traj) > 1 else by_traj[traj]
    # Eq. 5: discounted return of each turn within its trajectory
    returns = [0.0] * len(records)
    for key in {(r["task"], r["traj"]) for r in records}:
        idx = [i for i, r in enumerate(records) if (r["task"], r["traj"]) == key]
        running = 0.0
        for i in reversed(idx):
            running = records[i]["reward"] + gamma * running
            returns[i] = running
    # Eq. 6-7: step groups of equal anchors within a task, returns normalised within each
    step = [0.0] * len(records)
    clusters = {}
    for i, r in enumerate(records):
        clusters.setdefault((r["task"], r["anchor"]), []).append(i)
    for idx in clusters.values():
        for i, a in zip(idx, norm([returns[i] for i in idx], step_norm_by_std), strict=True):
            step[i] = a
    # Eq. 8
    return [episode[(r["task"], r["traj"])] + omega * s for r, s in zip(records, step, strict=True)]


def build(trajectories, gap=2):
    """Rows from ``[(task, [(anchor, reward), ...]), ...]``: a 3-token prompt, then per turn 2
    sampled tokens and ``gap`` observation tokens. Returns the batch pieces and the records."""
    rows, turns, records = [], [], []
    for traj, (task, steps) in enumerate(trajectories):
        mask, row_turns = [0, 0, 0], []
        for anchor, reward in steps:
            row_turns.append(A.Turn(len(mask), len(mask) + 2, anchor, reward))
            mask += [1, 1] + [0] * gap
            records.append(
                {
                    "task": task,
                    "traj": traj,
                    "anchor": anchor,
                    "reward": reward,
                    "score": sum(r for _, r in steps),
                }
            )
        rows.append(mask)
        turns.append(row_turns)
    width = max(len(m) for m in rows)
    mask = torch.tensor([m + [0] * (width - len(m)) for m in rows], dtype=torch.float32)
    scores = torch.tensor([sum(r for _, r in steps) for _, steps in trajectories])
    last = [t[-1].end - 1 for t in turns]
    return A.token_rewards(scores, last, width), mask, [task for task, _ in trajectories], turns, records


def per_turn(adv, turns):
    """Each turn's advantage, read from its tokens (which must all carry the same value)."""
    out = []
    for r, row in enumerate(turns):
        for t in row:
            values = adv[r, t.start : t.end]
            assert torch.allclose(values, values[0].expand_as(values))
            out.append(float(values[0]))
    return out


# three samples of task "x" and two of task "y"; "y" reaches anchors named like "x"'s
GROUPS = [
    ("x", [("s0", 0.0), ("A", 0.0), ("B", 1.0)]),
    ("x", [("s0", 0.0), ("A", 0.0), ("C", 0.0), ("A", 0.0), ("B", 1.0)]),
    ("x", [("s0", 0.0), ("D", 0.0)]),
    ("y", [("s0", 0.0), ("A", 0.3)]),
    ("y", [("s0", 0.0), ("E", 0.0), ("A", 0.0)]),
]


@pytest.mark.parametrize(
    "gamma,omega,norm_by_std,step_norm_by_std",
    [(0.95, 1.0, True, False), (0.5, 0.3, True, True), (0.9, 2.0, False, False), (0.8, 1.0, False, True)],
)
def test_gigpo_matches_the_reference_formulas(gamma, omega, norm_by_std, step_norm_by_std):
    rewards, mask, index, turns, records = build(GROUPS)
    kw = {"gamma": gamma, "omega": omega, "norm_by_std": norm_by_std, "step_norm_by_std": step_norm_by_std}
    adv, returns = A.gigpo_advantages(rewards, mask, index, turns, **kw)
    expected = reference_gigpo(records, **kw)
    assert per_turn(adv, turns) == pytest.approx(expected, abs=1e-5)
    assert torch.equal(adv, returns)
    assert adv[mask == 0].abs().max() == 0  # observation and padding tokens carry nothing


def test_equal_anchors_group_across_trajectories_never_across_tasks_and_singletons_get_zero():
    rewards, mask, index, turns, _ = build(GROUPS)
    groups = A.step_groups(index, turns)
    assert sorted(groups[("x", "A")]) == [(0, 1), (1, 1), (1, 3)]  # twice in one trajectory too
    assert sorted(groups[("y", "A")]) == [(3, 1), (4, 2)]  # "y"'s A is not "x"'s A
    grpo, _ = A.grpo_advantages(rewards, mask, index)
    adv, _ = A.gigpo_advantages(rewards, mask, index, turns, gamma=0.9, omega=1.0)
    step = per_turn(adv - grpo, turns)
    flat = [(r, t) for r, row in enumerate(turns) for t in range(len(row))]
    singletons = {m[0] for m in groups.values() if len(m) == 1}
    for (r, t), s in zip(flat, step, strict=True):
        if (r, t) in singletons:
            assert s == 0.0, (r, t)
    # "x"'s A: returns 0.9 (one step from B), 0.9**3 and 0.9 → the early visit of trajectory 1
    # (three steps from its reward) is below its step group's mean, the others above
    a = dict(zip(flat, step, strict=True))
    assert a[(1, 1)] < 0 < a[(0, 1)] and a[(0, 1)] == pytest.approx(a[(1, 3)])
    # coverage: the turns in step groups of two or more, over all turns
    sizes = [len(m) for m in groups.values()]
    assert A.anchor_coverage(index, turns) == pytest.approx(sum(s for s in sizes if s > 1) / sum(sizes))


def test_omega_zero_is_grpo_and_gamma_one_gives_equal_returns_equal_credit():
    rewards, mask, index, turns, _ = build(GROUPS)
    grpo, _ = A.grpo_advantages(rewards, mask, index)
    adv, _ = A.gigpo_advantages(rewards, mask, index, turns, gamma=0.9, omega=0.0)
    assert torch.equal(adv, grpo)
    # with gamma 1 every turn of "x"'s successful trajectories returns 1: their shared anchors
    # (s0, A, B) carry no step-level credit between them, only against the failed one (s0)
    adv1, _ = A.gigpo_advantages(rewards, mask, index, turns, gamma=1.0, omega=1.0)
    step = per_turn(adv1 - grpo, turns)
    assert step[1] == step[4] == step[6] == 0.0  # A in trajectories 0 and 1, both returning 1
    assert step[0] > 0 and step[8] < 0  # s0: two successes against one failure


def test_gigpo_is_registered_and_needs_turns():
    spec = get_algorithm("gigpo")
    assert spec.needs_groups and not spec.needs_critic
    assert spec.params == {"gamma": 0.95, "omega": 1.0, "norm_by_std": True, "step_norm_by_std": False}
    rewards, mask, index, turns, _ = build(GROUPS)
    adv, _ = spec.estimator()(A.Batch(rewards, mask, index, None, turns), **spec.params)
    assert adv.abs().sum() > 0
    with pytest.raises(AgentGymError, match="gigpo needs each row's turns"):
        spec.estimator()(A.Batch(rewards, mask, index), **spec.params)


# -- turns from episodes ----------------------------------------------------------------------


def _episode(observations, actions, *, rewards=None, success=False):
    """A babyai-like episode: prompt (3 tokens), then per step 2 sampled and 2 observation tokens."""
    mask, steps = [0, 0, 0], []
    for i, (obs, action) in enumerate(zip(observations, actions, strict=True)):
        mask += [1, 1, 0, 0]
        steps.append(Step(action=action, observation=obs, reward=(rewards or [0.0] * len(actions))[i]))
    tokens = Tokens(ids=list(range(len(mask))), loss_mask=mask, reward_index=len(mask) - 3)
    return Episode(
        env="babyai",
        task_id=1,
        messages=[Message(role="system", content="sys"), Message(role="user", content="start here")],
        steps=steps,
        tokens=tokens,
        success=success,
        num_turns=len(steps),
    )


def test_turns_of_an_episode_anchor_on_what_each_step_acted_in():
    from agentgym_train.rl.batch import episode_turns

    a = _episode(["room 1", "room 2", "done"], ["go", "go", "go"], success=True)
    b = _episode(["room 1", "no Action: line", "room 2"], ["go", None, "go"])
    ta, tb = episode_turns(a, "success", 1.0), episode_turns(b, "success", 0.0)
    assert [(t.start, t.end) for t in ta] == [(3, 5), (7, 9), (11, 13)]
    assert [t.reward for t in ta] == [0.0, 0.0, 1.0] and [t.reward for t in tb] == [0.0, 0.0, 0.0]
    assert ta[0].anchor == tb[0].anchor  # both start in the task's one state
    assert ta[1].anchor == tb[1].anchor  # "room 1" in both
    # after a reply that did not parse: the env state of the turn before, seen through the error
    assert tb[2].anchor not in (ta[1].anchor, ta[2].anchor)
    d = _episode(["room 9", "no Action: line", "room 2"], ["go", None, "go"])
    assert episode_turns(d, "success", 0.0)[2].anchor != tb[2].anchor  # the same error, another state
    # ``return``: the env's own step rewards, discounted by GiGPO from there
    r = _episode(["room 1", "room 2", "done"], ["go", "go", "go"], rewards=[0.1, 0.0, 0.9])
    assert [t.reward for t in episode_turns(r, "return", 1.0)] == [0.1, 0.0, 0.9]


def test_a_reply_cut_off_by_the_context_acts_in_the_state_the_last_step_left():
    from agentgym_train.rl.batch import episode_turns

    ep = _episode(["room 1", "room 2"], ["go", "go"])
    ep.tokens.loss_mask += [1, 1]  # a third reply, never stepped
    ep.tokens.ids += [0, 0]
    turns = episode_turns(ep, "success", 0.0)
    longer = episode_turns(_episode(["room 1", "room 2", "room 3"], ["go", "go", "go"]), "success", 0.0)
    assert len(turns) == 3 and turns[2].reward == 0.0
    assert turns[2].anchor == longer[2].anchor  # "room 2", the state its step would have acted in


def test_an_env_state_key_merges_observations_of_one_state():
    """BabyAI's key drops the line an invalid action or a listing of actions puts before the
    scene: the state the agent is in, not what its last action was."""
    from agentgym.plugins import get_env_spec

    spec = get_env_spec("babyai")
    scene = "You see a red ball 1 two steps ahead.\nAvailable actions: turn left, turn right"
    assert spec.anchor_of(scene, {}) == scene
    assert (
        spec.anchor_of("Invalid action 'fly': not an action here\n" + scene, {"valid_action": False}) == scene
    )
    assert spec.anchor_of("You can take the following actions: turn left, turn right\n" + scene, {}) == scene
    assert spec.anchor_of("The task is completed. " + scene, {}) != scene
    # an env without a key: the observation text itself
    assert get_env_spec("guess").state_key is None
    assert get_env_spec("guess").anchor_of("Higher.", {}) == "Higher."
