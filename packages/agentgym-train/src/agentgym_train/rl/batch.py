"""From a step's episodes to what the loss reads: each episode's score and turns, token batches
and advantages.

Backend-neutral: nothing here owns a model or an optimizer. The native RL step
(:mod:`agentgym_train.rl.step`) runs these pieces; the verl backend scores and credits its
episodes with the same functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentgym.plugins import get_env_spec
from agentgym.rewards import apply_reward_transform
from agentgym.trajectory import Episode
from agentgym_train.models.logprobs import pad_rows
from agentgym_train.rl.algorithms import Batch, Turn, anchor_coverage, token_rewards


def episode_score(ep: Episode, reward: str, params: dict[str, Any] | None = None) -> float:
    """The scalar an episode is trained on: its success (0/1), its return, or the sum of a reward
    transform's per-step rewards (e.g. ``format_penalty``: the return minus a penalty per invalid
    action)."""
    if reward == "success":
        return float(ep.success)
    if reward == "return":
        return float(ep.return_)

    return float(sum(apply_reward_transform(reward, ep, **(params or {}))))


def turn_spans(loss_mask: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of sampled tokens: one per model turn, in order."""
    spans, start = [], None
    for i, m in enumerate([*loss_mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def turn_rewards(ep: Episode, reward: str, score: float, params: dict[str, Any] | None = None) -> list[float]:
    """The reward paid for each step, summing to the episode's ``score``: the env's step rewards
    (``return``), a reward transform's, or the whole score on the last step (``success``)."""
    if reward == "return":
        return [float(st.reward) for st in ep.steps]
    if reward == "success":
        return [0.0] * (len(ep.steps) - 1) + [score] if ep.steps else []

    return [float(r) for r in apply_reward_transform(reward, ep, **(params or {}))]


def step_anchors(ep: Episode, anchor_of: Callable[[str, dict[str, Any]], str]) -> list[str]:
    """The state each turn acts in, as a short digest, one more than the steps (the last is the
    state the episode ended in): the opening prompt for the first (one task's episodes all start
    in its one state), then the state key of the observation the step before returned
    (``EnvSpec.anchor_of``). A turn after a reply that did not parse acts in the same env state as
    the turn before, seen through the parser's message: both go in its key."""
    import hashlib

    def digest(text: str) -> str:
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    first = next((m.content for m in ep.messages if m.role == "user"), "")
    anchors = [digest("start\0" + first)]
    for st in ep.steps:
        key = (
            anchor_of(st.observation, st.info)
            if st.action is not None
            else anchors[-1] + "\0" + st.observation
        )
        anchors.append(digest(key))
    return anchors


def episode_turns(ep: Episode, reward: str, score: float, params: dict[str, Any] | None = None) -> list[Turn]:
    """The episode's model turns: each one's span of sampled tokens, anchor state and reward
    (:class:`agentgym_train.rl.algorithms.Turn`). Spans and steps pair up in order; a last reply
    without a step (the context ran out) acts in the state the last step left, unrewarded."""

    spans = turn_spans(ep.tokens.loss_mask) if ep.tokens else []
    anchors = step_anchors(ep, get_env_spec(ep.env).anchor_of)
    rewards = turn_rewards(ep, reward, score, params) + [0.0]  # a reply cut off by the context
    return [Turn(a, b, anchor, r) for (a, b), anchor, r in zip(spans, anchors, rewards, strict=False)]


def invalid_turn_mask(ep: Episode, width: int) -> torch.Tensor:
    """1 on the sampled tokens of each turn whose action was invalid or did not parse."""
    out = torch.zeros(width)
    # a turn is a run of sampled tokens and a step of the episode: the two lists pair up in
    # order (an episode cut short by its context has a last turn without a step)
    for (a, b), step in zip(turn_spans(ep.tokens.loss_mask), ep.steps, strict=False):
        if not step.valid_action:
            out[a:b] = 1.0
    return out


@dataclass
class TokenBatch:
    """A step's trainable episodes as right-padded ``B x T`` rows, each up to its last sampled
    token, shortest first (micro-batches pad to their longest row; the loss does not depend on row
    order)."""

    episodes: list[Episode]
    ids: torch.Tensor
    mask: torch.Tensor  # the loss mask: 1 exactly on sampled tokens
    lengths: list[int]
    scores: torch.Tensor  # one per episode (``episode_score``)
    groups: list[Any]  # the rollout group of each episode (its task when it has none)
    turns: list[list[Turn]]  # each episode's turns (``episode_turns``)

    @classmethod
    def from_episodes(
        cls, episodes: Sequence[Episode], reward: str, reward_params: dict[str, Any] | None = None
    ) -> TokenBatch | None:
        """The episodes that ran to an end with a sampled token to put their reward on (None when
        there are none): an env failure is left out, never scored 0."""
        usable = [
            ep
            for ep in episodes
            if ep.termination != "error" and ep.tokens and ep.tokens.reward_index is not None
        ]
        if not usable:
            return None
        # a row ends at its last sampled token: under causal attention what follows (an
        # observation after the last reply, where an episode's tokens hold one: the rollout engine
        # appends none, other sources may) changes no log-probability the loss reads
        ends = {id(ep): ep.tokens.reward_index + 1 for ep in usable}
        usable.sort(key=lambda ep: ends[id(ep)])
        ids, mask = pad_rows(
            [ep.tokens.ids[: ends[id(ep)]] for ep in usable],
            masks=[ep.tokens.loss_mask[: ends[id(ep)]] for ep in usable],
        )
        scores = [episode_score(ep, reward, reward_params) for ep in usable]
        return cls(
            episodes=usable,
            ids=ids,
            mask=mask,
            lengths=[ends[id(ep)] for ep in usable],
            scores=torch.tensor(scores),
            # a group is one task's samples: the same group number in two envs is two groups
            groups=[(ep.env, ep.group if ep.group is not None else ep.task_id) for ep in usable],
            turns=[episode_turns(ep, reward, s, reward_params) for ep, s in zip(usable, scores, strict=True)],
        )

    def select(self, rows: Sequence[int]) -> TokenBatch:
        """The batch of these rows only (in the same order), its width cut to their longest."""
        width = max((self.lengths[i] for i in rows), default=0)
        return TokenBatch(
            episodes=[self.episodes[i] for i in rows],
            ids=self.ids[list(rows), :width],
            mask=self.mask[list(rows), :width],
            lengths=[self.lengths[i] for i in rows],
            scores=self.scores[list(rows)],
            groups=[self.groups[i] for i in rows],
            turns=[self.turns[i] for i in rows],
        )

    def anchor_coverage(self) -> dict[str, float]:
        """Per env: the share of turns whose anchor state another sample of their task also
        reached (GiGPO's step groups of two or more)."""
        out = {}
        for env in sorted({ep.env for ep in self.episodes}):
            rows = [i for i, ep in enumerate(self.episodes) if ep.env == env]
            out[env] = anchor_coverage([self.groups[i] for i in rows], [self.turns[i] for i in rows])
        return out

    @property
    def width(self) -> int:
        return self.ids.shape[1]

    def token_rewards(self) -> torch.Tensor:
        """Each episode's score on its last sampled token."""
        return token_rewards(self.scores, [ep.tokens.reward_index for ep in self.episodes], self.width)

    def invalid_turns(self) -> torch.Tensor:
        return torch.stack([invalid_turn_mask(ep, self.width) for ep in self.episodes])

    def invalid_turn_rate(self) -> float:
        turns = [st.valid_action for ep in self.episodes for st in ep.steps]
        return sum(not ok for ok in turns) / max(len(turns), 1)


@dataclass(frozen=True)
class Estimator:
    """The algorithm's advantage estimator (``AlgorithmSpec.estimator()``) and its parameters (the
    algorithm's defaults under the run's ``algo_params``)."""

    estimate: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    params: dict[str, Any]


def advantages(
    batch: TokenBatch,
    estimator: Estimator,
    *,
    values: torch.Tensor | None = None,
    invalid_action_penalty: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)``, both ``B x T``, from an algorithm's estimator
    (``AlgorithmSpec.estimator()``); then the turn-level penalty on invalid turns, after the
    estimator so that no group normalisation scales it up where every sample of a task fails."""
    adv, returns = estimator.estimate(
        Batch(batch.token_rewards(), batch.mask, batch.groups, values, batch.turns), **estimator.params
    )
    if invalid_action_penalty:
        adv = adv - invalid_action_penalty * batch.invalid_turns()
    return adv, returns


def informative_rows(adv: torch.Tensor, mask: torch.Tensor) -> list[int]:
    """The rows with a nonzero advantage on some sampled token. The others (every sample of their
    task scored the same, and no turn-level credit or penalty moved them) add nothing to the
    policy gradient: they are neither forwarded nor back-propagated."""
    return [i for i in range(adv.shape[0]) if bool(((adv[i] != 0) & (mask[i] > 0)).any())]
