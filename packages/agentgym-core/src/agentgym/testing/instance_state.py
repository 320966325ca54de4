"""The kit's check of what an instance holds after a reset: an instance that played episodes, reset
to a task, holds the same attributes with the same values as a fresh instance reset to it. The
carry-over check (carryover.py) compares what episodes show; this one sees state no episode of the
kit shows yet, such as a move budget that only runs out after a thousand moves.

An env names the attributes that legitimately keep their value across episodes, or differ between
two instances (a cache, a JVM or browser handle, a generator seeded once), in
``persistent_attributes`` (a class attribute of ``TextEnv``; the names of every class of the env's
MRO count). Values are compared structurally: containers item by item, objects by their attributes,
random generators by their state, the same object on both sides as equal, up to ``MAX_DEPTH`` levels
and ``MAX_VALUES`` values an attribute (beyond those, nothing more is compared)."""

from __future__ import annotations

import math
import random
import re
import types
from collections.abc import Callable
from typing import Any

from agentgym.env import TextEnv
from agentgym.testing.config import Plan
from agentgym.testing.episodes import random_episode, run_actions

MAX_DEPTH = 8
MAX_VALUES = 200_000
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


class _Missing:
    def __repr__(self) -> str:
        return "not set"


_MISSING = _Missing()
NAMES = ("on the used instance", "on a fresh one")


def tests(plan: Plan) -> dict[str, Callable[..., Any]]:
    def test_reset_leaves_instance_as_fresh(conformance_env: TextEnv, conformance_expert: Any) -> None:
        problem = instance_problem(plan, conformance_env, conformance_expert)
        assert problem is None, problem

    return {"test_reset_leaves_instance_as_fresh": test_reset_leaves_instance_as_fresh}


def persistent_attributes(env: Any) -> set[str]:
    """The attribute names ``env``'s classes declare persistent (``persistent_attributes``)."""
    names: set[str] = set()
    for klass in type(env).__mro__:
        names.update(klass.__dict__.get("persistent_attributes", ()))
    return names


def instance_problem(plan: Plan, used: TextEnv, expert: Any = None) -> str | None:
    """Play episodes on ``used`` (another task to the end, then the test split's first part-way),
    reset it to that task, and compare its attributes with a fresh instance's after the same reset;
    what differs first, with the fix, or ``None``."""
    spec = plan.spec
    task_id = plan.reuse_ids[0]
    other = next((t for t in plan.ids if t != task_id), task_id)
    if spec.expert is not None and expert is not None:
        for t, part in ((other, 1.0), (task_id, 0.5)):
            actions = expert(t)[0]
            run_actions(used, t, actions[: max(1, int(len(actions) * part))])
    else:
        for t in (other, task_id):
            random_episode(spec, used, t, plan.turns, random.Random(f"{spec.name}/state/{t}"))
    used.reset(options={"task_id": task_id})
    fresh = spec.make()
    try:
        fresh.reset(options={"task_id": task_id})
        difference = state_difference(used, fresh)
    finally:
        fresh.close()
    if difference is None:
        return None
    name, detail = difference
    klass = type(used).__name__
    return (
        f"task {task_id}: after episodes of tasks {other} and {task_id}, a reset to task {task_id} "
        f"leaves attribute {name!r} unlike a fresh instance's after the same reset: {detail}. "
        f"To fix: reset {name} in reset_task, or, if it legitimately persists across episodes (a "
        f"cache, a handle, a generator seeded once), declare it in {klass}.persistent_attributes "
        f'(persistent_attributes = ("{name}", ...))'
    )


def state_difference(used: Any, fresh: Any) -> tuple[str, str] | None:
    """The first attribute (by name) whose value differs between two instances, less the declared
    persistent ones: ``(name, what differs)``, or ``None``."""
    skip = persistent_attributes(used)
    mine, theirs = vars(used), vars(fresh)
    for name in sorted((set(mine) | set(theirs)) - skip):
        a, b = mine.get(name, _MISSING), theirs.get(name, _MISSING)
        if a is _MISSING or b is _MISSING:
            return name, f"{_short(a)} {NAMES[0]}, {_short(b)} {NAMES[1]}"
        try:
            found = _Compare((used, fresh)).first(a, b, f"self.{name}")
        except Exception:  # an object that will not be looked into (a property that raises): its repr
            found = None if _text(a) == _text(b) else (f"self.{name}", a, b)
        if found is not None:
            path, x, y = found
            return name, f"{path} is {_short(x)} {NAMES[0]}, {_short(y)} {NAMES[1]}"
    return None


class _Compare:
    """A structural comparison of two values, with the path to where they first differ."""

    def __init__(self, roots: tuple[Any, Any]):
        self.roots = roots
        self.left = MAX_VALUES
        self.seen: set[tuple[int, int]] = set()

    def first(self, a: Any, b: Any, path: str, depth: int = 0) -> tuple[str, Any, Any] | None:
        self.left -= 1
        if a is b or self.left < 0 or self._roots(a, b) or (id(a), id(b)) in self.seen:
            return None  # the same object, past the budget, the instances themselves, or a cycle
        if type(a) is not type(b):
            return path, a, b
        if isinstance(a, (str, bytes, int, bool, complex, type(None))):
            return None if a == b else (path, a, b)
        if isinstance(a, float):
            return None if a == b or (math.isnan(a) and math.isnan(b)) else (path, a, b)
        if depth >= MAX_DEPTH:
            return None if _text(a) == _text(b) else (path, a, b)
        self.seen.add((id(a), id(b)))
        return self._inside(a, b, path, depth + 1)

    def _inside(self, a: Any, b: Any, path: str, depth: int) -> tuple[str, Any, Any] | None:
        if isinstance(a, (list, tuple)):
            if len(a) != len(b):
                return f"len({path})", len(a), len(b)
            return self._all(
                ((x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))), depth
            )
        if isinstance(a, dict):
            if set(a) != set(b):
                return f"{path}.keys()", sorted(map(repr, a)), sorted(map(repr, b))
            return self._all(((a[k], b[k], f"{path}[{k!r}]") for k in a), depth)
        if isinstance(a, (set, frozenset)):
            return None if a == b else (path, a, b)
        state = _generator_state(a)
        if state is not None:
            return self.first(state, _generator_state(b), f"{path} (its state)", depth)
        if type(a).__module__ == "numpy" and hasattr(a, "shape"):
            return None if _arrays_equal(a, b) else (path, a, b)
        if isinstance(a, types.MethodType):
            same_self = a.__self__ is b.__self__ or self._roots(a.__self__, b.__self__)
            return None if a.__func__ is b.__func__ and same_self else (path, a, b)
        if isinstance(a, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)):
            return None if getattr(a, "__qualname__", a) == getattr(b, "__qualname__", b) else (path, a, b)
        fields = _fields(a)
        if fields is not None:
            other = _fields(b) or {}
            if set(fields) != set(other):
                return f"{path} attributes", sorted(fields), sorted(other)
            return self._all(((fields[k], other[k], f"{path}.{k}") for k in fields), depth)
        return None if _equal(a, b) else (path, a, b)

    def _roots(self, a: Any, b: Any) -> bool:
        return a is self.roots[0] and b is self.roots[1]

    def _all(self, pairs: Any, depth: int) -> tuple[str, Any, Any] | None:
        for x, y, where in pairs:
            found = self.first(x, y, where, depth)
            if found is not None or self.left < 0:
                return found
        return None


def _generator_state(value: Any) -> Any:
    """A random generator's state (``random.Random``, numpy's ``Generator`` and ``RandomState``)."""
    if isinstance(value, random.Random):
        return value.getstate()
    if type(value).__module__.startswith("numpy.random"):
        if hasattr(value, "bit_generator"):
            return value.bit_generator.state
        if hasattr(value, "get_state"):
            return value.get_state(legacy=False)
    return None


def _arrays_equal(a: Any, b: Any) -> bool:
    import numpy

    if getattr(a, "shape", None) != getattr(b, "shape", None) or getattr(a, "dtype", None) != b.dtype:
        return False
    try:
        return bool(numpy.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    except TypeError:
        return bool(numpy.array_equal(a, b))


def _fields(value: Any) -> dict[str, Any] | None:
    """An object's attributes: its ``__dict__`` and slots; ``None`` for one with neither."""
    out: dict[str, Any] = dict(vars(value)) if hasattr(value, "__dict__") else {}
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                out[slot] = getattr(value, slot)
    return out if hasattr(value, "__dict__") or out else None


def _equal(a: Any, b: Any) -> bool:
    """Objects with neither attributes nor a known shape: their own ``==`` where they define one,
    else their repr less memory addresses."""
    if type(a).__eq__ is not object.__eq__:
        try:
            return bool(a == b)
        except Exception:
            pass
    return _text(a) == _text(b)


def _text(value: Any) -> str:
    try:
        return _ADDRESS.sub("0x?", repr(value))
    except Exception:
        return type(value).__qualname__


def _short(value: Any, limit: int = 120) -> str:
    text = _text(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
