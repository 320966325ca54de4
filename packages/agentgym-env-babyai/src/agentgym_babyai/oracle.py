"""A planner with full knowledge of the grid that acts through the agent's macro actions.

Every turn it reads what the mission still asks for (minigrid's instruction objects track their own
progress), turns that into target cells and a finishing primitive (face, pick up, toggle, drop),
computes the shortest primitive distance to the target from every pose on the whole grid, and
takes the available macro action (``go to ...``, ``toggle and go through ...``, a turn, a step)
that brings the agent closest to the target for the primitives it spends. The macro actions only
reach what the agent sees, so the grid knowledge picks *which* visible thing to head for; a
BabyAIBot-style explorer would spend most of a 20-turn budget looking around.

It handles the instructions of BabyAI's levels (go to, pick up, open, put next, and their
sequences), locked doors on the way (fetch the key of their colour first) and objects blocking the
way (pick them up and put them aside). Where it has no plan — a key hidden in a box, a key behind
another locked door, nothing reachable — it returns ``None`` and the caller falls back to the bot.
"""

from __future__ import annotations

import copy
import heapq
from typing import Any

from agentgym_babyai.scene import DIRS, DROP, FORWARD, LEFT, PICKUP, RIGHT, TOGGLE, Scene

INF = 1 << 30
BLOCKER_COST = 8  # a path that moves an object out of the way costs this much more per object
ANY_KEY = "any"  # distance maps where every locked door opens (to find which key is needed)


def pending_instr(instr: Any) -> Any:
    """The action instruction (go to / pick up / open / put next) the mission asks for next."""
    from minigrid.envs.babyai.core.verifier import ActionInstr, AfterInstr, AndInstr, BeforeInstr

    if isinstance(instr, ActionInstr):
        return instr
    if isinstance(instr, BeforeInstr):
        return pending_instr(instr.instr_b if instr.a_done == "success" else instr.instr_a)
    if isinstance(instr, AfterInstr):
        return pending_instr(instr.instr_a if instr.b_done == "success" else instr.instr_b)
    if isinstance(instr, AndInstr):
        return pending_instr(instr.instr_b if instr.a_done == "success" else instr.instr_a)
    return None


class _Grid:
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

    def without(self, pos: tuple[int, int]) -> _Grid:
        """The same grid with the object at ``pos`` taken away (as if picked up)."""
        g = copy.copy(self)
        g.cells = list(self.cells)
        g.cells[pos[1] * self.width + pos[0]] = None
        return g

    def walled(self, cells: set[tuple[int, int]]) -> _Grid:
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

    def here(self, g: _Grid) -> int:
        return self.get(g.agent, INF)


def distances(g: _Grid, targets: set[tuple[int, int]], key: Any, blockers: bool = False) -> Distances:
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
    g: _Grid, dist: Distances, start: tuple[int, int, int] | None = None
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


def _opens(carrying: Any, door: Any) -> bool:
    return carrying is not None and carrying.type == "key" and carrying.color == door.color


def _spots_next_to(g: _Grid, fixed: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Free cells where a dropped object lands next to one of ``fixed``."""
    return {(x + dx, y + dy) for x, y in fixed for dx, dy in DIRS if g.free(x + dx, y + dy)}


def _facing(pos: tuple[int, int]) -> list[tuple[int, int, int]]:
    return [(pos[0] - dx, pos[1] - dy, d) for d, (dx, dy) in enumerate(DIRS)]


def _first_obstacle(
    g: _Grid, targets: set, carrying: Any, starts: list[tuple[int, int, int]]
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
            and _opens(carrying, obj)
        ):
            openable = (x, y)
        if g.enter_cost(x, y, carrying, False) >= INF:
            return openable or (x, y), path
    return None


def _simulate(pose: tuple[int, int, int], primitives: list[int]) -> tuple[int, int, int]:
    x, y, d = pose
    for p in primitives:
        if p == LEFT:
            d = (d - 1) % 4
        elif p == RIGHT:
            d = (d + 1) % 4
        elif p == FORWARD:
            x, y = x + DIRS[d][0], y + DIRS[d][1]
    return x, y, d


class Oracle:
    """Next macro action for the mission of one minigrid env, or ``None`` when it has no plan."""

    def __init__(self, mini: Any):
        self.mini = mini
        self.aside: tuple[int, tuple[int, int]] | None = None  # (carried object, where it goes)
        self.seen: set[tuple] = set()

    def __call__(self, scene: Scene) -> str | None:
        from minigrid.envs.babyai.core.verifier import GoToInstr, OpenInstr, PickupInstr, PutNextInstr

        instr = pending_instr(self.mini.instrs)
        g = _Grid(self.mini)
        # The planner is deterministic: back in a state it acted in before, it is going round in
        # circles (it happens on a few crowded layouts). No plan, then.
        state = (g.agent, id(g.carrying), id(instr), g.signature())
        if state in self.seen:
            return None
        self.seen.add(state)
        carrying = g.carrying
        if isinstance(instr, GoToInstr):
            return self._reach(g, scene, g.positions(instr.desc.obj_set), "face")
        if isinstance(instr, PickupInstr):
            return self._reach(g, scene, g.positions(instr.desc.obj_set), "pickup")
        if isinstance(instr, OpenInstr):
            doors = [o for o in instr.desc.obj_set if id(o) in g.where]
            if doors and all(o.is_locked for o in doors) and not any(_opens(carrying, o) for o in doors):
                return self._fetch_key(g, scene, {o.color for o in doors}, g.positions(doors))
            return self._reach(g, scene, g.positions(doors), "toggle", keep=carrying)
        if isinstance(instr, PutNextInstr):
            fixed = instr.desc_fixed.obj_set
            if carrying is not None and any(carrying is o for o in instr.desc_move.obj_set):
                return self._reach(g, scene, _spots_next_to(g, g.positions(fixed)), "drop", keep=carrying)
            return self._carry(
                g,
                scene,
                g.positions(instr.desc_move.obj_set),
                lambda after: _spots_next_to(after, after.positions(fixed)),
            )
        return None

    # -- subgoals -----------------------------------------------------------------------------
    def _reach(
        self, g: _Grid, scene: Scene, targets: set, finish: str, keep: Any = None, depth: int = 0
    ) -> str | None:
        """Go to face one of ``targets`` and finish there, clearing the way first if needed.

        ``keep``: a carried object the finish needs (put next, open). Before a pick-up, anything
        else carried is put aside once no locked door on the way needs it.
        """
        if not targets or depth > 4:
            return None
        carrying = g.carrying
        dist = distances(g, targets, carrying)
        if dist.here(g) < INF:
            if carrying is not None and carrying is not keep and finish == "pickup":
                bare = distances(g, targets, None) if carrying.type == "key" else dist
                if bare.here(g) < INF:
                    return self._put_aside(g, scene, bare)
            return self._navigate(g, scene, dist, targets, finish)
        found = _first_obstacle(g, targets, carrying, [g.agent])
        if found is None:
            return None
        obstacle, way = found
        return self._clear(g, scene, obstacle, set(way), depth)

    def _clear(
        self, g: _Grid, scene: Scene, obstacle: tuple[int, int], way: set, depth: int = 0
    ) -> str | None:
        """Deal with the first obstacle on the way (the cells ``way``): a locked door (fetch its
        key) or an object (move it out of the way)."""
        obj = g.get(*obstacle)
        carrying = g.carrying
        if obj.type == "door":
            if _opens(carrying, obj):
                return self._reach(g, scene, {obstacle}, "toggle", keep=carrying, depth=depth + 1)
            # What is carried may be the key to the way to this door's key: fetching decides.
            return self._fetch_key(g, scene, {obj.color}, {obstacle}, depth + 1)
        if carrying is not None:
            return self._put_aside(g, scene, way)
        return self._reach(g, scene, {obstacle}, "pickup", depth=depth + 1)

    def _fetch_key(self, g: _Grid, scene: Scene, colors: set[str], doors: set, depth: int = 0) -> str | None:
        """Fetch a key of one of ``colors`` that can be carried to one of ``doors``."""
        keys = {pos for pos in g.where.values() if (o := g.get(*pos)).type == "key" and o.color in colors}
        # a key locked in behind the very doors it is for (the target of GoToImpUnlock, say) is no use
        walled = g.walled(doors)
        keys = {k for k in keys if distances(walled, {k}, ANY_KEY, blockers=True).here(g) < INF}
        if not keys:
            return None  # in a box, say: no plan
        return self._carry(g, scene, keys, lambda after: doors, depth)

    def _carry(self, g: _Grid, scene: Scene, sources: set, targets: Any, depth: int = 0) -> str | None:
        """Pick up one of the objects at ``sources`` to carry it to face ``targets(grid)``.

        With the object in hand neither a key nor a blocker can be carried, so the way it will
        be carried is cleared first (a door unlocked, an object moved) when nothing else works.
        """
        clear, blocked = set(), []
        for pos in sorted(sources):
            after, obj = g.without(pos), g.get(*pos)
            leg = distances(after, targets(after), obj)
            if any(leg.get(p, INF) < INF for p in _facing(pos)):
                clear.add(pos)
            else:
                blocked.append((pos, after, obj))
        if clear:
            return self._reach(g, scene, clear, "pickup", depth=depth)
        for pos, after, obj in blocked:
            starts = [p for p in _facing(pos) if after.stands(p)]
            found = _first_obstacle(after, targets(after), obj, starts)
            if found is not None:
                obstacle, leg = found
                fetch = distances(g, {pos}, ANY_KEY, blockers=True)
                way = set(leg) | (set(trace(g, fetch)[0]) if fetch.here(g) < INF else set())
                return self._clear(g, scene, obstacle, way, depth + 1)
        return None

    def _put_aside(self, g: _Grid, scene: Scene, way: Distances | set) -> str | None:
        """Drop what is carried where it blocks neither ``way`` (a distance map to follow, or
        cells) nor a doorway.

        The spot is chosen once per carried object: re-choosing every turn (the way changes as
        the agent turns) can make the agent turn back and forth.
        """
        carrying = g.carrying
        if self.aside is not None and self.aside[0] == id(carrying) and g.free(*self.aside[1]):
            spots = {self.aside[1]}
        else:
            if isinstance(way, Distances):
                path = set(trace(g, way)[0]) if way.here(g) < INF else set()
            else:
                path = way
            free = [(x, y) for x in range(g.width) for y in range(g.height) if g.free(x, y)]
            spots = {c for c in free if c not in path and not g.near_door(*c)} or set(free)
        dist = distances(g, spots, carrying)
        if dist.here(g) >= INF:
            return None
        if len(spots) > 1:
            x, y, d = trace(g, dist)[1]
            spot = (x + DIRS[d][0], y + DIRS[d][1])
            self.aside = (id(carrying), spot)
            spots = {spot}
            dist = distances(g, spots, carrying)
        return self._navigate(g, scene, dist, spots, "drop")

    # -- one turn -----------------------------------------------------------------------------
    def _navigate(self, g: _Grid, scene: Scene, dist: dict, targets: set, finish: str) -> str | None:
        now = dist.here(g)
        if now == 0:
            # facing the target: 'face' only happens when a sequence's next step targets what the
            # agent already faces (minigrid checks it on the next primitive): look away and back
            finishing = {
                "pickup": f"pickup {scene.label_at(scene.front_pos)}",
                "toggle": "toggle",
                "drop": "drop",
            }
            return finishing.get(finish, "turn left")
        best, best_score, best_len = None, 0.0, 0
        for name, primitives in scene.actions.items():
            if not primitives or DROP in primitives:
                continue
            if PICKUP in primitives or (TOGGLE in primitives and finish == "toggle"):
                obj = next((o for o in scene.objects if name.endswith(" " + o.label)), None)
                if (
                    obj is not None
                    and obj.pos in targets
                    and ((PICKUP in primitives) == (finish == "pickup"))
                ):
                    return name  # it finishes the subgoal in one turn
                if PICKUP in primitives:
                    continue
            if primitives == [TOGGLE]:
                continue  # 'toggle and go through' covers a useful toggle
            after = dist.get(_simulate(g.agent, primitives), INF)
            if after >= INF:
                continue
            progress = now - after
            waste = len(primitives) - progress
            score = progress - 0.5 * waste
            if progress > 0 and (score > best_score or (score == best_score and len(primitives) < best_len)):
                best, best_score, best_len = name, score, len(primitives)
        return best
