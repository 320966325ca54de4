"""The kit's instance-state check (testing/instance_state.py): a used instance reset to a task holds
what a fresh one holds. Planted bugs run the kit on a small env (pytester, in a subprocess), as
test_conformance_bugs.py does; the comparison itself is tested on plain objects."""

from __future__ import annotations

import random
import textwrap

import pytest
from planted_counter import COUNTER, IMPORTS, failed_tests, plant

from agentgym.testing.instance_state import persistent_attributes, state_difference

ENVS = (
    IMPORTS
    + COUNTER
    + textwrap.dedent("""

    class Budget(Counter):  # a move budget set in __init__, never reset; the kit never spends it all
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.budget = 1000
        def step_action(self, action):
            if self.budget == 0:
                return "No moves left.", 0.0, True, False, {}
            self.budget -= 1
            return super().step_action(action)

    class Undeclared(Counter):  # a cache of the tasks seen, not declared
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._seen = {}
        def reset_task(self, task_id):
            self._seen.setdefault(task_id, f"Say inc {task_id + 1} times.")
            return super().reset_task(task_id)

    class Cached(Undeclared):  # the same cache, declared persistent
        persistent_attributes = ("_seen",)

    def expert(env):
        return lambda obs, info: "inc"

    def spec(name, factory, exp=expert):
        return EnvSpec(name=name, factory=factory, expert=exp, default_max_turns=10,
                       splits={"test": Split(range(8), {"all": list(range(8))})})

    @hookimpl
    def agentgym_envs():
        return [spec("budget", Budget), spec("budgetnoexpert", Budget, None), spec("cached", Cached),
                spec("undeclared", Undeclared)]
""")
)


@pytest.fixture
def kit(pytester, monkeypatch):
    """``kit(env)``: the kit on an env of ``ENVS``, less the checks these bugs do not concern."""
    plant(pytester, monkeypatch, ENVS)

    def run(env: str):
        options = {"env": env, "http": False, "cross_process": False}
        pytester.makeconftest(f"agentgym_conformance = {options!r}\n")
        return pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rA")

    return run


def test_a_budget_never_spent_is_caught_by_what_the_instance_holds(kit):
    result = kit("budget")
    # no episode shows the budget (1000 moves, never reached): only the instance's state does
    assert failed_tests(result) == {"test_reset_leaves_instance_as_fresh"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [
            "*a reset to task * leaves attribute 'budget' unlike a fresh instance's after the same reset: "
            "self.budget is [0-9][0-9][0-9] on the used instance, 1000 on a fresh one. To fix: reset budget in "
            "reset_task, or, if it legitimately persists across episodes*declare it in "
            'Budget.persistent_attributes (persistent_attributes = ("budget", ...))*'
        ]
    )


def test_the_budget_is_caught_without_an_expert(kit):
    result = kit("budgetnoexpert")
    assert "test_reset_leaves_instance_as_fresh" in failed_tests(result)
    result.stdout.fnmatch_lines(["*leaves attribute 'budget'*on the used instance, 1000 on a fresh one*"])


def test_a_declared_persistent_cache_is_not_flagged(kit):
    result = kit("cached")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*PASSED*test_reset_leaves_instance_as_fresh*"])


def test_the_same_cache_undeclared_is_flagged(kit):
    result = kit("undeclared")
    assert failed_tests(result) == {"test_reset_leaves_instance_as_fresh"}
    result.stdout.fnmatch_lines(["*self._seen.keys() is * on the used instance, * on a fresh one*"])


# -- the comparison -----------------------------------------------------------------------------
class Plain:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


class Slotted:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


def test_values_compare_by_structure_not_identity():
    numpy = pytest.importorskip("numpy")

    def instance(seed: int = 1, rows: int = 2) -> Plain:
        env = Plain(
            grid=numpy.zeros((rows, 2)),
            rng=random.Random(seed),
            gen=numpy.random.default_rng(seed),
            inner=Plain(items=[Slotted(1), {"k": (1.0, float("nan"))}], parse=str.split),
            lock=object(),  # no attributes, no equality of its own: compared by its repr, less addresses
        )
        env.me = env  # a cycle back to the instance
        env.method = env.__init__  # bound to the instance itself
        return env

    assert state_difference(instance(), instance()) is None
    assert state_difference(instance(), instance(rows=3)) == (
        "grid",
        "self.grid is array([[0., 0.],\n       [0., 0.]]) on the used instance, "
        "array([[0., 0.],\n       [0., 0.],\n       [0., 0.]]) on a fresh one",
    )
    name, detail = state_difference(instance(seed=1), instance(seed=2))
    assert name == "gen" and detail.startswith("self.gen (its state)")
    used, fresh = instance(), instance()
    used.inner.items[0].x = 2
    assert state_difference(used, fresh) == (
        "inner",
        "self.inner.items[0].x is 2 on the used instance, 1 on a fresh one",
    )
    used.extra = 1
    assert state_difference(used, instance())[0] == "extra"


def test_declared_names_add_up_over_the_classes():
    from agentgym import TextEnv

    class Env(TextEnv):
        persistent_attributes = ("_cache",)

    class Sub(Env):
        persistent_attributes = ("handle",)

    assert {"_cache", "handle", "_np_random"} <= persistent_attributes(Sub())
    used, fresh = Sub(), Sub()
    used._cache, used.handle, fresh._cache, fresh.handle = {1: 2}, object(), {}, object()
    assert state_difference(used, fresh) is None


class Opaque:
    """An object that refuses to be looked into (its ``__dict__`` raises)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    @property
    def __dict__(self):
        raise RuntimeError("not here")

    def __repr__(self) -> str:
        return f"Opaque({self.name})"


def test_an_object_that_refuses_to_be_looked_into_is_compared_by_its_repr():
    assert state_difference(Plain(o=Opaque("a")), Plain(o=Opaque("a"))) is None
    assert state_difference(Plain(o=Opaque("a")), Plain(o=Opaque("b"))) == (
        "o",
        "self.o is Opaque(a) on the used instance, Opaque(b) on a fresh one",
    )
