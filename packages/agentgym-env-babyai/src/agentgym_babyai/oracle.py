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

The grid it reads and the distances over it are ``paths.py``'s; this module turns the mission into
subgoals and a subgoal into this turn's macro action.
"""

from __future__ import annotations

from typing import Any

from agentgym_babyai.paths import (
    ANY_KEY,
    INF,
    Distances,
    FlatGrid,
    distances,
    first_obstacle,
    opens,
    trace,
)
from agentgym_babyai.scene import DIRS, DROP, FORWARD, LEFT, PICKUP, RIGHT, TOGGLE, Scene


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


def _spots_next_to(g: FlatGrid, fixed: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Free cells where a dropped object lands next to one of ``fixed``."""
    return {(x + dx, y + dy) for x, y in fixed for dx, dy in DIRS if g.free(x + dx, y + dy)}


def _facing(pos: tuple[int, int]) -> list[tuple[int, int, int]]:
    return [(pos[0] - dx, pos[1] - dy, d) for d, (dx, dy) in enumerate(DIRS)]


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
        g = FlatGrid(self.mini)
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
            if doors and all(o.is_locked for o in doors) and not any(opens(carrying, o) for o in doors):
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
        self, g: FlatGrid, scene: Scene, targets: set, finish: str, keep: Any = None, depth: int = 0
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
        found = first_obstacle(g, targets, carrying, [g.agent])
        if found is None:
            return None
        obstacle, way = found
        return self._clear(g, scene, obstacle, set(way), depth)

    def _clear(
        self, g: FlatGrid, scene: Scene, obstacle: tuple[int, int], way: set, depth: int = 0
    ) -> str | None:
        """Deal with the first obstacle on the way (the cells ``way``): a locked door (fetch its
        key) or an object (move it out of the way)."""
        obj = g.get(*obstacle)
        carrying = g.carrying
        if obj.type == "door":
            if opens(carrying, obj):
                return self._reach(g, scene, {obstacle}, "toggle", keep=carrying, depth=depth + 1)
            # What is carried may be the key to the way to this door's key: fetching decides.
            return self._fetch_key(g, scene, {obj.color}, {obstacle}, depth + 1)
        if carrying is not None:
            return self._put_aside(g, scene, way)
        return self._reach(g, scene, {obstacle}, "pickup", depth=depth + 1)

    def _fetch_key(
        self, g: FlatGrid, scene: Scene, colors: set[str], doors: set, depth: int = 0
    ) -> str | None:
        """Fetch a key of one of ``colors`` that can be carried to one of ``doors``."""
        keys = {pos for pos in g.where.values() if (o := g.get(*pos)).type == "key" and o.color in colors}
        # a key locked in behind the very doors it is for (the target of GoToImpUnlock, say) is no use
        walled = g.walled(doors)
        keys = {k for k in keys if distances(walled, {k}, ANY_KEY, blockers=True).here(g) < INF}
        if not keys:
            return None  # in a box, say: no plan
        return self._carry(g, scene, keys, lambda after: doors, depth)

    def _carry(self, g: FlatGrid, scene: Scene, sources: set, targets: Any, depth: int = 0) -> str | None:
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
            found = first_obstacle(after, targets(after), obj, starts)
            if found is not None:
                obstacle, leg = found
                fetch = distances(g, {pos}, ANY_KEY, blockers=True)
                way = set(leg) | (set(trace(g, fetch)[0]) if fetch.here(g) < INF else set())
                return self._clear(g, scene, obstacle, way, depth + 1)
        return None

    def _put_aside(self, g: FlatGrid, scene: Scene, way: Distances | set) -> str | None:
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
    def _navigate(self, g: FlatGrid, scene: Scene, dist: dict, targets: set, finish: str) -> str | None:
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
