"""What the agent sees, in words, and the macro actions it can take from here.

A ``Scene`` is computed once per observation from the minigrid env: the visible objects (nearest
first, numbered per name), what is straight ahead, what is carried, and one breadth-first search
over (position, direction) states through the visible, passable cells. Every macro action
(``go to red ball 1``, ``pickup ...``, ``toggle and go through ...``) is compiled from that one
search into primitive minigrid actions; the ones that cannot be done now get a reason instead.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

# minigrid.core.actions.Actions values (kept as ints: no import needed on the hot path)
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))
PICKABLE = ("key", "ball", "box")


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
        for col in range(size):
            x, y = ax + front * fx + (col - half) * rx, ay + front * fy + (col - half) * ry
            inside = 0 <= x < width and 0 <= y < height
            row.append((x, y, grid.get(x, y) if inside else _OUTSIDE))
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
        self._search()
        self.actions, self.reasons = self._compile()

    # -- path search --------------------------------------------------------------------------
    def _search(self) -> None:
        start = self.agent
        parent: dict[tuple[int, int, int], tuple[tuple[int, int, int], int] | None] = {start: None}
        queue = deque([start])
        passable = self.passable
        while queue:
            state = queue.popleft()
            x, y, d = state
            dx, dy = DIRS[d]
            for nxt, action in (
                ((x + dx, y + dy, d), FORWARD),
                ((x, y, (d - 1) % 4), LEFT),
                ((x, y, (d + 1) % 4), RIGHT),
            ):
                if nxt in parent or (action == FORWARD and (nxt[0], nxt[1]) not in passable):
                    continue
                parent[nxt] = (state, action)
                queue.append(nxt)
        self._parent = parent  # insertion order is BFS order: the first match is a shortest path

    def _path_to(self, state: tuple[int, int, int]) -> list[int]:
        actions = []
        step = self._parent[state]
        while step is not None:
            state, action = step
            actions.append(action)
            step = self._parent[state]
        return actions[::-1]

    def path_to_face(self, pos: tuple[int, int]) -> list[int] | None:
        """Shortest primitive path to stand next to ``pos`` facing it."""
        px, py = pos
        for state in self._parent:
            dx, dy = DIRS[state[2]]
            if state[0] + dx == px and state[1] + dy == py:
                return self._path_to(state)
        return None

    def path_to_stand(self, pos: tuple[int, int]) -> list[int] | None:
        """Shortest primitive path to stand on ``pos`` (an open door, the goal)."""
        for state in self._parent:
            if (state[0], state[1]) == pos:
                return self._path_to(state)
        return None

    # -- macro actions ------------------------------------------------------------------------
    def _compile(self) -> tuple[dict[str, list[int]], dict[str, str]]:
        acts: dict[str, list[int]] = {"turn left": [LEFT], "turn right": [RIGHT]}
        why: dict[str, str] = {}
        front = self.front_obj
        if self.front_pos in self.passable:
            acts["move forward"] = [FORWARD]
        else:
            what = "wall" if front is None or front.type == "wall" else self._name(front)
            why["move forward"] = f"There is a {what} in front of you, you can't move forward."
        carrying = self.carrying
        for o in self.objects:
            label = o.label
            face = self.path_to_face(o.pos)
            if o.type == "goal":
                stand = self.path_to_stand(o.pos)
                if stand is not None:
                    acts["go to goal"] = stand
                else:
                    why["go to goal"] = "There is no path to the goal."
                continue
            if face is None:
                why[f"go to {label}"] = f"You cannot go to {label}, as there is no path leading to it."
            else:
                acts[f"go to {label}"] = face
            if o.type in PICKABLE:
                if carrying is not None:
                    why[f"pickup {label}"] = (
                        f"You cannot pickup {label}, as you are already carrying a {self._name(carrying)}. Drop it first."
                    )
                elif face is None:
                    why[f"pickup {label}"] = f"You cannot pickup {label}, as there is no path leading to it."
                else:
                    acts[f"pickup {label}"] = face + [PICKUP]
            elif o.type == "door":
                if o.state == "open":
                    stand = self.path_to_stand(o.pos)
                    if stand is None:
                        why[f"go through {label}"] = (
                            f"You cannot go through {label}, as there is no path leading to it."
                        )
                    else:
                        acts[f"go through {label}"] = stand + [FORWARD]
                    continue
                action = f"toggle and go through {label}"
                why[f"go through {label}"] = (
                    f"You cannot go through {label}, as it is {o.state}. Toggle it first."
                )
                if o.state == "locked" and (carrying is None or carrying.type != "key"):
                    why[action] = f"You cannot toggle and go through {label}, as you are not carrying a key."
                elif o.state == "locked" and carrying.color != o.color:
                    why[action] = (
                        f"You cannot toggle and go through {label}, as the color of the key you are carrying "
                        "does not match the color of the door."
                    )
                elif face is None:
                    why[action] = (
                        f"You cannot toggle and go through {label}, as there is no path leading to it."
                    )
                else:
                    acts[action] = face + [TOGGLE, FORWARD]
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
            acts["toggle"] = [TOGGLE]
        if carrying is None:
            why["drop"] = "You cannot drop anything, as you are not carrying anything."
        elif front is not None:
            why["drop"] = "You cannot drop the object, as there is already an object in front of you."
        else:
            acts["drop"] = [DROP]
        acts["check available actions"] = []
        return acts, why

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
        return "Available actions: [" + ", ".join(f'"{a}"' for a in self.actions) + "]"
