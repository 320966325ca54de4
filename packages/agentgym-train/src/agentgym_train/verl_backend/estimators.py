"""Our algorithms in verl's advantage-estimator registry.

The built-in ones are verl's own estimators under verl's names (:data:`translate.ESTIMATORS`;
the parity tests check they compute what ours do). Any other (``gigpo``, or one a third party
registers through ``agentgym_algorithms``) is bridged: registered with verl as
``agentgym_<name>``, called with verl's token rewards, response mask and group ids, plus each
row's turns (:class:`~agentgym_train.rl.algorithms.Turn`), so the same algorithm trains on both
backends.

verl's trainer hands a registered estimator no per-sample data beyond those tensors and the group
ids, so the turns travel apart: the agent loop writes them into the sample's ``extra_fields``
(:func:`turn_fields`, spans relative to verl's response), which verl stores with the sample in
TransferQueue, and :func:`patch_compute_advantage` fetches them for a bridged estimator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentgym_train.rl.algorithms import Batch, Turn
from agentgym_train.rl.specs import AlgorithmSpec, algorithms
from agentgym_train.verl_backend.translate import ESTIMATORS, estimator_name

#: The extra fields a sample's turns travel in (parallel lists, one entry per model turn).
TURN_FIELDS = ("agentgym_turn_starts", "agentgym_turn_ends", "agentgym_turn_anchors", "agentgym_turn_rewards")


def turn_fields(turns: Sequence[Turn], offset: int) -> dict[str, list[Any]]:
    """A row's turns as agent-loop extra fields, their spans moved ``offset`` tokens left: verl's
    response tensor starts at the first sampled token, after the prompt."""
    starts, ends, anchors, rewards = TURN_FIELDS
    return {
        starts: [t.start - offset for t in turns],
        ends: [t.end - offset for t in turns],
        anchors: [t.anchor for t in turns],
        rewards: [float(t.reward) for t in turns],
    }


def turns_of(extra: Mapping[str, Any] | None) -> list[Turn]:
    """The turns :func:`turn_fields` wrote (none for a sample without them)."""
    if not isinstance(extra, Mapping) or TURN_FIELDS[0] not in extra:
        return []
    columns = [list(extra[name]) for name in TURN_FIELDS]
    return [Turn(int(a), int(b), str(k), float(r)) for a, b, k, r in zip(*columns, strict=True)]


def bridge(spec: AlgorithmSpec) -> Callable[..., Any]:
    """A verl estimator (``token_level_rewards, response_mask, index, config``, and ``turns`` where
    :func:`patch_compute_advantage` passes them) running ``spec``'s."""

    def estimator(
        token_level_rewards: Any,
        response_mask: Any,
        index: Any = None,
        config: Any = None,
        turns: list[list[Turn]] | None = None,
        **_: Any,
    ):
        rows = token_level_rewards.shape[0]
        groups = list(index) if index is not None else list(range(rows))
        params = dict(spec.params)
        extra = config.get("agentgym_params") if config is not None and hasattr(config, "get") else None
        params.update(dict(extra or {}))
        batch = Batch(token_level_rewards, response_mask.float(), groups, turns=turns)
        return spec.estimator()(batch, **params)

    estimator.__name__ = f"agentgym_{spec.name}"
    estimator.agentgym_spec = spec  # type: ignore[attr-defined] - marks a bridge for the patch
    return estimator


def register() -> list[str]:
    """Register every installed plugin algorithm with verl (idempotent); returns verl's names."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    names = []
    for spec in algorithms().values():
        if spec.name in ESTIMATORS or spec.needs_critic:
            continue
        name = estimator_name(spec.name)
        if name not in ADV_ESTIMATOR_REGISTRY:
            register_adv_est(name)(bridge(spec))
        names.append(name)
    return names


def patch_compute_advantage() -> None:
    """Give bridged estimators each row's turns. verl's v1 trainer (``PPOTrainer._compute_advantage``)
    fetches a fixed set of fields from TransferQueue and calls ``compute_advantage``, which passes a
    registered estimator only token rewards, the response mask, the ``uid`` group ids and the
    algorithm config. It does so through ``compute_advantage_for_multi_trajectories``, looked up by
    name in ``trainer_base`` and given the batch's keys: that name is wrapped here. For a bridged
    estimator the wrapper fetches the rows' ``extra_fields`` by those keys and calls the estimator
    as ``compute_advantage`` would, plus ``turns``; every other estimator goes to verl's function
    unchanged. Installed by our sampler (:mod:`.hooks`), in the trainer's process."""
    import transfer_queue as tq
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1 import trainer_base

    original = trainer_base.compute_advantage_for_multi_trajectories
    if getattr(original, "_agentgym_patched", False):
        return

    @functools.wraps(original)
    def compute_advantage_for_multi_trajectories(
        data: Any, batch_keys: list[str], adv_estimator: Any, config: Any = None, **kwargs: Any
    ) -> Any:
        fn = core_algos.ADV_ESTIMATOR_REGISTRY.get(getattr(adv_estimator, "value", adv_estimator))
        if getattr(fn, "agentgym_spec", None) is None:
            return original(data, batch_keys=batch_keys, adv_estimator=adv_estimator, config=config, **kwargs)
        # advantages are computed for training batches only: the "train" partition. Rows are in
        # batch_keys' order (the trainer fetched ``data`` by them). verl's padding rows copy a real
        # row's extra fields, but have a uid of their own and a zero mask: they change nothing
        fetched = tq.kv_batch_get(keys=list(batch_keys), partition_id="train", select_fields=["extra_fields"])
        turns = [turns_of(getattr(e, "data", e)) for e in fetched["extra_fields"]]
        adv, returns = fn(
            token_level_rewards=data.batch["token_level_rewards"],
            response_mask=data.batch["response_mask"],
            index=data.non_tensor_batch["uid"],
            config=config,
            turns=turns,
        )
        data.batch["advantages"], data.batch["returns"] = adv, returns
        return data

    compute_advantage_for_multi_trajectories._agentgym_patched = True  # type: ignore[attr-defined]
    trainer_base.compute_advantage_for_multi_trajectories = compute_advantage_for_multi_trajectories
