"""The grid as the expert's planner reads it, and shortest primitive paths over it.

Distances are counted in minigrid's primitives (a turn, a step, a door's toggle), from every pose
(position and direction) to a pose facing a target, by one Dijkstra search run backwards from the
targets; ``trace`` follows one shortest path back out, and ``first_obstacle`` finds what on it needs
a key or free hands. The rules a search runs under: which key the agent carries (``ANY_KEY``: every
locked door opens) and whether objects in the way may be moved (at ``BLOCKER_COST`` each).
"""

from __future__ import annotations

import copy
import heapq
from typing import Any

from agentgym_babyai.scene import DIRS

INF = 1 << 30
BLOCKER_COST = 8  # a path that moves an object out of the way costs this much more per object
ANY_KEY = "any"  # distance maps where every locked door opens (to find which key is needed)


class FlatGrid:
    """The grid as flat lists, read once per turn: cell objects and where each object is."""

    def __init__(self, mini: Any):
        grid = mini.grid
        self.width, self.height = grid.width, grid.height
        self.cells: list[Any] = grid.grid  # index y * width + x (minigrid's own list: read only)
        self.where: dict[int, tuple[int, int]] = {}
        for i, obj in enumerate(self.cells):
            if obj is not None:
                self.where[id(obj)] = (i % self.width, i // self.width)
        self.agent = (int(mini.agent_pos[0]), int(mini.agent_pos[1]), int(mini.agent_dir))
        self.carrying = mini.carrying

    def get(self, x: int, y: int) -> Any:
        if 0 <= x < self.width and 0 <= y < self.height:
            return self.cells[y * self.width + x]
        return _WALL

    def signature(self) -> tuple:
        """Where every object is, and each door's state."""
        return tuple(
            (pos, getattr(self.cells[pos[1] * self.width + pos[0]], "is_open", None))
            for key, pos in sorted(self.where.items(), key=lambda kv: kv[1])
            if self.cells[pos[1] * self.width + pos[0]].type != "wall"
        )

    def without(self, pos: tuple[int, int]) -> FlatGrid:
        """The same grid with the object at ``pos`` taken away (as if picked up)."""
        g = copy.copy(self)
        g.cells = list(self.cells)
        g.cells[pos[1] * self.width + pos[0]] = None
        return g

    def walled(self, cells: set[tuple[int, int]]) -> FlatGrid:
        """The same grid with ``cells`` walled up."""
        g = copy.copy(self)
        g.cells = list(self.cells)
        for x, y in cells:
            g.cells[y * self.width + x] = _WALL
        return g

    def stands(self, pose: tuple[int, int, int]) -> bool:
        return self.enter_cost(pose[0], pose[1], None, False) < INF

    def positions(self, objs: list[Any]) -> set[tuple[int, int]]:
        return {self.where[id(o)] for o in objs if id(o) in self.where}

    def free(self, x: int, y: int) -> bool:
        return self.get(x, y) is None and (x, y) != self.agent[:2]

    def near_door(self, x: int, y: int) -> bool:
        return any((o := self.get(x + dx, y + dy)) is not None and o.type == "door" for dx, dy in DIRS)

    def enter_cost(self, x: int, y: int, key: Any, blockers: bool) -> int:
        """Primitives to step into (x, y) from a neighbour facing it; INF if it cannot be done."""
        obj = self.get(x, y)
        if obj is None:
            return 1
        kind = obj.type
        if kind == "door":
            if obj.is_open:
                return 1
            if not obj.is_locked:
                return 2  # toggle, forward
            if key == ANY_KEY or (key is not None and key.type == "key" and key.color == obj.color):
                return 2
            return INF
        if kind == "goal" or kind == "floor":
            return 1
        if blockers and kind in ("ball", "key", "box"):
            return 1 + BLOCKER_COST
        return INF


_WALL = type("_Wall", (), {"type": "wall", "is_open": False, "is_locked": False})()


class Distances(dict):
    """Pose -> primitives to the target, with the rules it was computed under."""

    def __init__(self, key: Any, blockers: bool):
        super().__init__()
        self.key, self.blockers = key, blockers

    def here(self, g: FlatGrid) -> int:
        return self.get(g.agent, INF)


def distances(g: FlatGrid, targets: set[tuple[int, int]], key: Any, blockers: bool = False) -> Distances:
    """Primitives from every pose to a pose facing one of ``targets`` (Dijkstra, backwards).

    ``key``: what the agent carries (a key opens the locked doors of its colour) or ``ANY_KEY``;
    ``blockers``: whether objects in the way may be moved (at ``BLOCKER_COST`` each).
    """
    dist = Distances(key, blockers)
    heap: list[tuple[int, tuple[int, int, int]]] = []
    for tx, ty in targets:
        for d, (dx, dy) in enumerate(DIRS):
            x, y = tx - dx, ty - dy
            if g.enter_cost(x, y, key, blockers) < INF or (x, y) == g.agent[:2]:
                dist[(x, y, d)] = 0
                heap.append((0, (x, y, d)))
    heapq.heapify(heap)
    while heap:
        cost, state = heapq.heappop(heap)
        if cost > dist.get(state, INF):
            continue
        x, y, d = state
        # predecessors: turning into this direction, or stepping forward into this cell
        preds = [((x, y, (d + 1) % 4), 1), ((x, y, (d - 1) % 4), 1)]
        enter = g.enter_cost(x, y, key, blockers)
        if enter < INF:
            dx, dy = DIRS[d]
            px, py = x - dx, y - dy
            if g.enter_cost(px, py, key, blockers) < INF or (px, py) == g.agent[:2]:
                preds.append(((px, py, d), enter))
        for prev, step in preds:
            c = cost + step
            if c < dist.get(prev, INF):
                dist[prev] = c
                heapq.heappush(heap, (c, prev))
    return dist


def trace(
    g: FlatGrid, dist: Distances, start: tuple[int, int, int] | None = None
) -> tuple[list[tuple[int, int]], tuple[int, int, int]]:
    """The cells entered along a shortest path from ``start`` (the agent's pose) to the target,
    and the pose it ends in."""
    state, cells, key, blockers = start or g.agent, [], dist.key, dist.blockers
    while dist.get(state, INF) > 0:
        x, y, d = state
        dx, dy = DIRS[d]
        here = dist[state]
        enter = g.enter_cost(x + dx, y + dy, key, blockers)
        fwd = (x + dx, y + dy, d)
        if enter < INF and dist.get(fwd, INF) + enter == here:
            state = fwd
            cells.append(fwd[:2])
            continue
        for turned in ((x, y, (d - 1) % 4), (x, y, (d + 1) % 4)):
            if dist.get(turned, INF) + 1 == here:
                state = turned
                break
        else:
            break
    return cells, state


def opens(carrying: Any, door: Any) -> bool:
    """Whether ``carrying`` is the key of ``door``'s colour."""
    return carrying is not None and carrying.type == "key" and carrying.color == door.color


def first_obstacle(
    g: FlatGrid, targets: set, carrying: Any, starts: list[tuple[int, int, int]]
) -> tuple[tuple[int, int], list[tuple[int, int]]] | None:
    """The first thing in the way from the best of ``starts`` to ``targets`` that needs a key or
    free hands. A locked door the carried key opens counts when an obstacle lies beyond it (open
    it while the key is in hand, or the key is put down to move the obstacle and fetched again).
    Returns the obstacle's cell and the cells of the way."""
    way = distances(g, targets, ANY_KEY, blockers=True)
    start = min(starts, key=lambda p: way.get(p, INF), default=None)
    if start is None or way.get(start, INF) >= INF:
        return None
    openable = None
    path = trace(g, way, start)[0]
    for x, y in path:
        obj = g.get(x, y)
        if (
            obj is not None
            and obj.type == "door"
            and obj.is_locked
            and openable is None
            and opens(carrying, obj)
        ):
            openable = (x, y)
        if g.enter_cost(x, y, carrying, False) >= INF:
            return openable or (x, y), path
    return None
