"""Task ids, levels and splits. Import-free (no minigrid), so the plugin module stays cheap.

Task ids mean what they mean in AgentGym's BabyAI server: ``level = LEVELS[task_id % 40]``,
``seed = task_id // 40``, the level reset with ``reset(seed=seed)``. A published AgentGym task-id list
therefore names the same tasks here.
"""

from __future__ import annotations

# The 40 levels in AgentGym's order (its table is 1-based: data_idx % 40 + 1).
LEVELS: tuple[str, ...] = (
    "BabyAI-GoToRedBallGrey-v0",
    "BabyAI-GoToRedBall-v0",
    "BabyAI-GoToRedBallNoDists-v0",
    "BabyAI-GoToObjS6-v0",
    "BabyAI-GoToLocalS8N7-v0",
    "BabyAI-GoToObjMazeS7-v0",
    "BabyAI-GoToImpUnlock-v0",
    "BabyAI-GoToSeqS5R2-v0",
    "BabyAI-GoToRedBlueBall-v0",
    "BabyAI-GoToDoor-v0",
    "BabyAI-GoToObjDoor-v0",
    "BabyAI-Open-v0",
    "BabyAI-OpenRedDoor-v0",
    "BabyAI-OpenDoorLoc-v0",
    "BabyAI-OpenRedBlueDoorsDebug-v0",
    "BabyAI-OpenDoorsOrderN4Debug-v0",
    "BabyAI-Pickup-v0",
    "BabyAI-UnblockPickup-v0",
    "BabyAI-PickupLoc-v0",
    "BabyAI-PickupDistDebug-v0",
    "BabyAI-PickupAbove-v0",
    "BabyAI-PutNextLocalS6N4-v0",
    "BabyAI-PutNextS7N4Carrying-v0",
    "BabyAI-Unlock-v0",
    "BabyAI-UnlockLocalDist-v0",
    "BabyAI-KeyInBox-v0",
    "BabyAI-UnlockPickupDist-v0",
    "BabyAI-BlockedUnlockPickup-v0",
    "BabyAI-UnlockToUnlock-v0",
    "BabyAI-ActionObjDoor-v0",
    "BabyAI-FindObjS7-v0",
    "BabyAI-KeyCorridorS6R3-v0",
    "BabyAI-OneRoomS20-v0",
    "BabyAI-MoveTwoAcrossS8N9-v0",
    "BabyAI-SynthS5R2-v0",
    "BabyAI-SynthLoc-v0",
    "BabyAI-SynthSeq-v0",
    "BabyAI-MiniBossLevel-v0",
    "BabyAI-BossLevel-v0",
    "BabyAI-BossLevelNoUnlock-v0",
)
NUM_LEVELS = len(LEVELS)

# Ids minigrid 3 renamed: it deprecated GoToObjS6-v0 (whose registration passed the wrong room
# size) for -v1, the level the name describes. Task ids keep the reference's names.
MINIGRID_IDS = {"BabyAI-GoToObjS6-v0": "BabyAI-GoToObjS6-v1"}
assert NUM_LEVELS == 40


def level_of(task_id: int) -> str:
    return LEVELS[task_id % NUM_LEVELS]


def seed_of(task_id: int) -> int:
    return task_id // NUM_LEVELS


def task_id_of(level: str, seed: int) -> int:
    return seed * NUM_LEVELS + LEVELS.index(level)


def short_name(level: str) -> str:
    """``BabyAI-GoToRedBall-v0`` -> ``GoToRedBall``."""
    return level.removeprefix("BabyAI-").rsplit("-v", 1)[0]


# The test split: the reference's categories and sizes (GoTo 55, Pickup 15, ActionObjDoor 5,
# FindObj 5, OneRoom 5, SynthLoc 5 = 90), five seeds of each level of a category, with seeds
# 10_000..10_004: far above any train seed, so the splits are disjoint.
TEST_CATEGORIES: dict[str, tuple[str, ...]] = {
    "GoTo": LEVELS[0:11],
    "Pickup": ("BabyAI-Pickup-v0", "BabyAI-UnblockPickup-v0", "BabyAI-PickupLoc-v0"),
    "ActionObjDoor": ("BabyAI-ActionObjDoor-v0",),
    "FindObj": ("BabyAI-FindObjS7-v0",),
    "OneRoom": ("BabyAI-OneRoomS20-v0",),
    "SynthLoc": ("BabyAI-SynthLoc-v0",),
}
TEST_SEEDS = range(10_000, 10_005)
# Train: seeds 0..9_999 of all 40 levels (task ids 0..399_999), categorised by level.
TRAIN_SEEDS = 10_000


def held_out_split() -> dict[str, list[int]]:
    return {
        category: sorted(task_id_of(level, seed) for level in levels for seed in TEST_SEEDS)
        for category, levels in TEST_CATEGORIES.items()
    }


def train_categories() -> dict[str, range]:
    # Ids of one level are an arithmetic progression: a range, not a 10k-element list.
    return {
        short_name(level): range(i, TRAIN_SEEDS * NUM_LEVELS, NUM_LEVELS) for i, level in enumerate(LEVELS)
    }
