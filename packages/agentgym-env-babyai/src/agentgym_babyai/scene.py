"""What the agent sees, in words, and the macro actions it can take from here.

A ``Scene`` is computed once per observation from the minigrid env: the visible objects (nearest
first, numbered per name), what is straight ahead, what is carried, and the cells the agent can walk
to. Every macro action (``go to red ball 1``, ``pickup ...``, ``toggle and go through ...``) that can
be done is listed from those; the ones that cannot be done now get a reason instead. Its primitive
minigrid actions come from one breadth-first search over (position, direction) states through the
visible, passable cells, run only when a macro action's primitives are asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

# minigrid.core.actions.Actions values (kept as ints: no import needed on the hot path)
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))
PICKABLE = ("key", "ball", "box")
#: a macro action: where to go first (None, or ("face" | "stand", cell)), then which primitives
Recipe = tuple[tuple[str, tuple[int, int]] | None, list[int]]


@dataclass
class Seen:
    """A visible object, placed relative to the agent."""

    type: str
    color: str
    state: str  # doors: open / closed / locked; others: ""
    pos: tuple[int, int]
    front: int
    right: int
    k: int = 0

    @property
    def name(self) -> str:
        if self.type == "door":
            return f"{self.color} {self.state} door"
        return f"{self.color} {self.type}"

    @property
    def label(self) -> str:
        return f"{self.name} {self.k}"

    def where(self) -> str:
        if self.right == 0:
            return f"right in front of you {self.front} steps away"
        side = "right" if self.right > 0 else "left"
        return f"{self.front} steps in front of you and {abs(self.right)} steps to your {side}"


def visible_cells(env: Any) -> list[tuple[int, int, int, int, Any]]:
    """The cells the agent sees, as ``(front, right, x, y, object)``.

    The same rule as minigrid's partial view (``gen_obs_grid``: a square in front of the agent,
    light spreading row by row away from it and stopped by what cannot be seen through), computed
    directly on the absolute grid: minigrid's version slices and rotates a copy of the grid, which
    cost more than everything else in a step.
    """
    grid = env.grid
    cells_list = grid.grid  # minigrid's flat cell list, index y * width + x (read directly: Grid.get
    # asserts its arguments on each of the 49 reads)
    size = env.agent_view_size
    half = size // 2
    ax, ay = int(env.agent_pos[0]), int(env.agent_pos[1])
    fx, fy = DIRS[int(env.agent_dir)]
    rx, ry = -fy, fx
    width, height = grid.width, grid.height
    # view[row][col]: row = distance ahead (0 = the agent's row), col = right offset + half
    view: list[list[Any]] = []
    for front in range(size):
        row = []
        x, y = ax + front * fx - half * rx, ay + front * fy - half * ry
        for _ in range(size):
            inside = 0 <= x < width and 0 <= y < height
            row.append((x, y, cells_list[y * width + x] if inside else _OUTSIDE))
            x, y = x + rx, y + ry
        view.append(row)
    seen = [[False] * size for _ in range(size)]
    seen[0][half] = True
    for front in range(size):
        cells, mark, ahead = view[front], seen[front], front + 1 < size
        for cols in (range(size - 1), range(size - 1, 0, -1)):
            step = 1 if cols.step == 1 else -1
            for col in cols:
                if not mark[col]:
                    continue
                obj = cells[col][2]
                if obj is not None and not obj.see_behind():
                    continue
                mark[col + step] = True
                if ahead:
                    seen[front + 1][col + step] = True
                    seen[front + 1][col] = True
    out = []
    for front in range(size):
        for col in range(size):
            if seen[front][col]:
                x, y, obj = view[front][col]
                out.append((front, col - half, x, y, None if obj is _OUTSIDE else obj))
    return out


def _path(parent: dict[int, tuple[int, int] | None], state: int) -> list[int]:
    """The actions that lead to ``state`` in a search's ``parent`` links."""
    actions = []
    step = parent[state]
    while step is not None:
        state, action = step
        actions.append(action)
        step = parent[state]
    return actions[::-1]


class _Outside:
    """Beyond the grid's edge: opaque, like the walls minigrid pads its view with."""

    type = "wall"

    def see_behind(self) -> bool:
        return False


_OUTSIDE = _Outside()


def _door_state(obj: Any) -> str:
    return "open" if obj.is_open else ("locked" if obj.is_locked else "closed")


class Scene:
    """The agent's view of one minigrid state: description, macro actions, reasons."""

    def __init__(self, env: Any):
        self.env = env
        ax, ay = int(env.agent_pos[0]), int(env.agent_pos[1])
        d = int(env.agent_dir)
        self.agent = (ax, ay, d)
        self.carrying = env.carrying
        grid = env.grid
        passable: set[tuple[int, int]] = {(ax, ay)}
        objects: list[Seen] = []
        cells: dict[tuple[int, int], Any] = {}
        for front, right, x, y, obj in visible_cells(env):
            if front == 0 and right == 0:
                continue
            if not (0 <= x < grid.width and 0 <= y < grid.height):
                continue
            cells[(x, y)] = obj
            if obj is None or (obj.can_overlap() and obj.type != "lava"):
                passable.add((x, y))
            if obj is not None and obj.type != "wall":
                state = _door_state(obj) if obj.type == "door" else ""
                objects.append(Seen(obj.type, obj.color, state, (x, y), front, right))
        objects.sort(key=lambda o: (abs(o.front) + abs(o.right), o.front, o.right))
        counts: dict[str, int] = {}
        for o in objects:
            counts[o.name] = counts.get(o.name, 0) + 1
            o.k = counts[o.name]
        self.objects = objects
        self.cells = cells
        self.passable = passable
        fx, fy = DIRS[d]
        self.front_pos = (ax + fx, ay + fy)
        self.front_obj = (
            grid.get(*self.front_pos) if 0 <= ax + fx < grid.width and 0 <= ay + fy < grid.height else None
        )
        # Which macro actions can be done needs only which cells the agent can reach (a flood fill);
        # their primitive paths need the search over poses, which runs only when one is asked for
        # (mostly once per step: the action taken), not for every action listed.
        self._reach = self._flood()
        self._passable_cells: set[int] | None = None  # passable, as _search numbers cells
        self._recipes, self.reasons = self._compile()
        #: the macro actions that can be done now, in the order they are listed
        self.names = list(self._recipes)

    @cached_property
    def actions(self) -> dict[str, list[int]]:
        """Every macro action that can be done now -> its primitive minigrid actions."""
        return {name: self.primitives(name) for name in self._recipes}  # type: ignore[misc]

    def primitives(self, name: str) -> list[int] | None:
        """The primitive actions of the macro action ``name``; ``None`` if it cannot be done now."""
        recipe = self._recipes.get(name)
        if recipe is None:
            return None
        goal, then = recipe
        if goal is None:
            return list(then)
        how, pos = goal
        path = self.path_to_face(pos) if how == "face" else self.path_to_stand(pos)
        assert path is not None  # the flood fill and the search agree on what is reachable
        return path + then

    def _flood(self) -> set[tuple[int, int]]:
        """The cells the agent can walk to (turning is free: every pose on them is reachable)."""
        passable = self.passable
        start = self.agent[:2]
        reach, stack = {start}, [start]
        while stack:
            x, y = stack.pop()
            for cell in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                if cell in passable and cell not in reach:
                    reach.add(cell)
                    stack.append(cell)
        return reach

    def _faceable(self, pos: tuple[int, int]) -> bool:
        reach = self._reach
        return any((pos[0] - dx, pos[1] - dy) in reach for dx, dy in DIRS)

    # -- path search --------------------------------------------------------------------------
    def _search(self, how: str, pos: tuple[int, int]) -> list[int] | None:
        """Shortest primitive path to the first pose, in breadth-first order over (x, y, direction)
        from the agent's pose through passable cells, that faces (``how="face"``) or stands on
        (``"stand"``) ``pos``; ``None`` if there is none.

        States are ints ``(y * stride + x) * 4 + d`` (cheaper to hash than tuples; the stride leaves
        a spare column so that a step off either side names no real cell). The search stops at the
        first match: the states are tried in the order they are found, forward before left before
        right, so the path is the one a full search would give first.
        """
        stride = self.env.grid.width + 1
        ax, ay, d0 = self.agent
        passable = self._passable_cells
        if passable is None:
            passable = self._passable_cells = {y * stride + x for x, y in self.passable}
        ahead = (1, stride, -1, -stride)  # cell offset one step in direction d (DIRS)
        target, face = pos[1] * stride + pos[0], how == "face"
        start = (ay * stride + ax) * 4 + d0
        parent: dict[int, tuple[int, int] | None] = {start: None}
        queue = [start]
        for state in queue:  # the list grows while it is walked: a FIFO queue
            cell, d = state >> 2, state & 3
            if (cell + ahead[d] if face else cell) == target:
                return _path(parent, state)
            front = cell + ahead[d]
            for nxt, action in (
                ((front << 2) | d, FORWARD),
                ((cell << 2) | ((d - 1) & 3), LEFT),
                ((cell << 2) | ((d + 1) & 3), RIGHT),
            ):
                if nxt in parent or (action == FORWARD and front not in passable):
                    continue
                parent[nxt] = (state, action)
                queue.append(nxt)
        return None

    def path_to_face(self, pos: tuple[int, int]) -> list[int] | None:
        """Shortest primitive path to stand next to ``pos`` facing it."""
        return self._search("face", pos)

    def path_to_stand(self, pos: tuple[int, int]) -> list[int] | None:
        """Shortest primitive path to stand on ``pos`` (an open door, the goal)."""
        return self._search("stand", pos)

    # -- macro actions ------------------------------------------------------------------------
    def _compile(self) -> tuple[dict[str, Recipe], dict[str, str]]:
        """The macro actions that can be done, as recipes (where to go first, then which primitives),
        and why each of the others cannot."""
        acts: dict[str, Recipe] = {"turn left": (None, [LEFT]), "turn right": (None, [RIGHT])}
        why: dict[str, str] = {}
        front = self.front_obj
        if self.front_pos in self.passable:
            acts["move forward"] = (None, [FORWARD])
        else:
            what = "wall" if front is None or front.type == "wall" else self._name(front)
            why["move forward"] = f"There is a {what} in front of you, you can't move forward."
        carrying = self.carrying
        for o in self.objects:
            label = o.label
            face = ("face", o.pos) if self._faceable(o.pos) else None
            if o.type == "goal":
                if o.pos in self._reach:
                    acts["go to goal"] = (("stand", o.pos), [])
                else:
                    why["go to goal"] = "There is no path to the goal."
                continue
            if face is None:
                why[f"go to {label}"] = f"You cannot go to {label}, as there is no path leading to it."
            else:
                acts[f"go to {label}"] = (face, [])
            if o.type in PICKABLE:
                if carrying is not None:
                    why[f"pickup {label}"] = (
                        f"You cannot pickup {label}, as you are already carrying a {self._name(carrying)}. Drop it first."
                    )
                elif face is None:
                    why[f"pickup {label}"] = f"You cannot pickup {label}, as there is no path leading to it."
                else:
                    acts[f"pickup {label}"] = (face, [PICKUP])
            elif o.type == "door":
                self._door_recipes(o, label, face, carrying, acts, why)
        self._hand_recipes(front, carrying, acts, why)
        acts["check available actions"] = (None, [])
        return acts, why

    def _door_recipes(
        self, o: Any, label: str, face: Any, carrying: Any, acts: dict[str, Recipe], why: dict[str, str]
    ) -> None:
        """A door's recipes (go through an open one; toggle and go through a closed one), or why not."""
        if o.state == "open":
            if o.pos not in self._reach:
                why[f"go through {label}"] = (
                    f"You cannot go through {label}, as there is no path leading to it."
                )
            else:
                acts[f"go through {label}"] = (("stand", o.pos), [FORWARD])
            return
        action = f"toggle and go through {label}"
        why[f"go through {label}"] = f"You cannot go through {label}, as it is {o.state}. Toggle it first."
        if o.state == "locked" and (carrying is None or carrying.type != "key"):
            why[action] = f"You cannot toggle and go through {label}, as you are not carrying a key."
        elif o.state == "locked" and carrying.color != o.color:
            why[action] = (
                f"You cannot toggle and go through {label}, as the color of the key you are carrying "
                "does not match the color of the door."
            )
        elif face is None:
            why[action] = f"You cannot toggle and go through {label}, as there is no path leading to it."
        else:
            acts[action] = (face, [TOGGLE, FORWARD])

    def _hand_recipes(self, front: Any, carrying: Any, acts: dict[str, Recipe], why: dict[str, str]) -> None:
        """What the agent can do with what is in front of it or in its hands: toggle, drop."""
        if front is None or front.type not in ("door", "box"):
            why["toggle"] = "There is nothing in front of you to toggle."
        elif (
            front.type == "door"
            and front.is_locked
            and (carrying is None or carrying.type != "key" or carrying.color != front.color)
        ):
            why["toggle"] = (
                f"You cannot toggle the {self._name(front)}, as you are not carrying a key of its color."
            )
        else:
            acts["toggle"] = (None, [TOGGLE])
        if carrying is None:
            why["drop"] = "You cannot drop anything, as you are not carrying anything."
        elif front is not None:
            why["drop"] = "You cannot drop the object, as there is already an object in front of you."
        else:
            acts["drop"] = (None, [DROP])

    @staticmethod
    def _name(obj: Any) -> str:
        if obj.type == "door":
            return f"{obj.color} {_door_state(obj)} door"
        return f"{obj.color} {obj.type}"

    def label_at(self, pos: tuple[int, int]) -> str | None:
        for o in self.objects:
            if o.pos == pos:
                return o.label
        return None

    # -- text ---------------------------------------------------------------------------------
    def describe(self) -> str:
        if self.objects:
            seen = " ".join(f"There is a {o.label} {o.where()}." for o in self.objects)
            text = "In front of you in this room, you can see several objects: " + seen
        else:
            text = "You cannot see any objects within sight."
        ax, ay, d = self.agent
        dx, dy = DIRS[d]
        steps, ahead = 1, None
        while (ax + steps * dx, ay + steps * dy) in self.passable:
            steps += 1
        cell = (ax + steps * dx, ay + steps * dy)
        if cell in self.cells:
            obj = self.cells[cell]
            ahead = "wall" if obj is None or obj.type == "wall" else self._name(obj)
        text += " The room has walls around you."
        if ahead is not None:
            text += f" You are facing a {ahead} {steps} steps away."
        if self.carrying is not None:
            text += f" You are carrying a {self._name(self.carrying)}."
        else:
            text += " You are not carrying anything."
        return text

    def action_list(self) -> str:
        return "Available actions: [" + ", ".join(f'"{a}"' for a in self.names) + "]"
