"""Cheaper construction and generation of minigrid's BabyAI levels, with the same results.

Resetting a level is most of what an episode costs (an expert solves a test task in a few macro
actions), and most of a reset is minigrid's level generation. Two of its costs are ours to cut
without touching what it generates (same random draws, same grid, same mission):

- ``gym.make`` per level switch: registry lookup, env checker and wrappers that ``BabyAIEnv``
  unwraps and drops at once. A level's class and keyword arguments are read from one ``gym.make``
  and later instances are constructed directly.
- ``check_objs_reachable``, a flood fill through ``Grid.get`` run on every (rejected or accepted)
  layout: the same fill over minigrid's flat cell list, set per instance so that other minigrid
  users in the process are left alone.

And a generated level can be copied (:func:`save_level`, :func:`load_level`): a GRPO group's n
samples of one task start from copies of one generation (``agentgym.resets``).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import gymnasium as gym
from minigrid.core.world_object import Wall
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling

# gym id -> (env class, constructor kwargs, the EnvSpec gym.make gave the unwrapped env)
_RECIPES: dict[str, tuple[type, dict[str, Any], Any]] = {}


def make_level(gym_id: str) -> Any:
    """The unwrapped minigrid env of ``gym_id``, as ``gym.make(gym_id).unwrapped`` makes it."""
    recipe = _RECIPES.get(gym_id)
    if recipe is None:
        env = gym.make(gym_id).unwrapped
        # gym.make passes the spec's kwargs and records them (and nothing else) on env.spec
        _RECIPES[gym_id] = (type(env), dict(env.spec.kwargs), env.spec)
    else:
        cls, kwargs, spec = recipe
        env = cls(**kwargs)
        env.spec = spec
    env.check_objs_reachable = _reachability_check(env)
    return env


def _reachability_check(env: Any) -> Any:
    """``RoomGridLevel.check_objs_reachable`` for ``env``: the same answer and the same exception."""

    def check_objs_reachable(raise_exc: bool = True) -> bool:
        grid = env.grid
        width, height, cells = grid.width, grid.height, grid.grid
        # minigrid's fill: every in-grid cell next to a reached empty cell or door is reached
        reached = bytearray(width * height)
        ax, ay = int(env.agent_pos[0]), int(env.agent_pos[1])
        stack = []
        if 0 <= ax < width and 0 <= ay < height:
            stack.append(ay * width + ax)
            reached[ay * width + ax] = 1
        while stack:
            p = stack.pop()
            cell = cells[p]
            if cell is not None and cell.type != "door":
                continue  # reached, but nothing beyond it is (walls, objects)
            y, x = divmod(p, width)
            for q, inside in (
                (p + 1, x + 1 < width),
                (p - 1, x > 0),
                (p + width, y + 1 < height),
                (p - width, y > 0),
            ):
                if inside and not reached[q]:
                    reached[q] = 1
                    stack.append(q)
        unreached = [
            p for p, cell in enumerate(cells) if cell is not None and not reached[p] and cell.type != "wall"
        ]
        if not unreached:
            return True
        if not raise_exc:
            return False
        # minigrid scans column by column: name the object it would have found first
        first = min(unreached, key=lambda p: (p % width, p // width))
        raise RejectSampling("unreachable object at " + str((first % width, first // width)))

    return check_objs_reachable


#: Attributes a level sets when it is made and never changes: shared by its copies, not copied.
_FIXED = frozenset(("observation_space", "action_space", "spec", "actions", "reward_range"))
#: Attributes set per instance that are remade on load (a closure over the instance; a stub).
_REMADE = frozenset(("check_objs_reachable", "gen_obs"))


def save_level(env: Any, extra: Any = None) -> tuple:
    """A copy of a generated level ``env`` (and ``extra``, copied with it), for :func:`load_level`.

    Walls are never changed once placed (only doors, keys, balls and boxes are): every copy shares
    them, which makes a copy about eight times cheaper than a generation. The instruction's
    verifiers point back at the env: they are pointed at the copy."""
    walls: list[Any] = []
    index: dict[int, int] = {}

    def persistent_id(obj: Any) -> Any:
        if obj is env:
            return "env"
        if type(obj) is Wall:
            k = index.get(id(obj))
            if k is None:
                k = index[id(obj)] = len(walls)
                walls.append(obj)
            return k
        return None

    state = {k: v for k, v in env.__dict__.items() if k not in _FIXED and k not in _REMADE}
    fixed = {k: v for k, v in env.__dict__.items() if k in _FIXED}
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = persistent_id  # type: ignore[method-assign]
    pickler.dump((state, extra))
    return type(env), fixed, buffer.getvalue(), walls, env.gen_obs


def load_level(saved: tuple) -> tuple[Any, Any]:
    """A new env in the state :func:`save_level` saved, and its ``extra``: ``(env, extra)``."""
    cls, fixed, blob, walls, gen_obs = saved
    env = cls.__new__(cls)
    unpickler = pickle.Unpickler(io.BytesIO(blob))
    unpickler.persistent_load = lambda key: env if key == "env" else walls[key]  # type: ignore[method-assign]
    state, extra = unpickler.load()
    env.__dict__.update(fixed)
    env.__dict__.update(state)
    env.check_objs_reachable = _reachability_check(env)
    env.gen_obs = gen_obs
    return env, extra
