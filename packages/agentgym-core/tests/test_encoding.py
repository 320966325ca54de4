"""``server.encoding.encode``: orjson straight from the env's result where that writes what
``jsonable`` then ``json.dumps`` write, and the walk first wherever it would not."""

from __future__ import annotations

import enum
import json
import uuid
from collections import OrderedDict

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym.protocol import jsonable
from agentgym.server.encoding import batch_reply, encode, with_reset


class Colour(enum.Enum):
    RED = "red"
    BLUE = 2


class Limit(enum.Enum):
    TOP = float("inf")


class Label(str):
    pass


def _nest(depth: int, kind: str) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value] if kind == "list" else (value,) if kind == "tuple" else {"k": value}
    return value


def _cycle() -> list:
    loop: list = []
    loop.append(loop)
    return loop


def dumps(content) -> str:
    """The reference: the standard library's compact JSON, non-ASCII as is."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"))


def _same(encoded: bytes, reference: str) -> None:
    try:
        expected = orjson.loads(reference)
    except orjson.JSONDecodeError:  # Infinity or NaN written: not JSON, so the text itself
        assert encoded.decode() == reference
    else:
        assert orjson.loads(encoded) == expected


ODD_INFOS = [
    {"plain": "text", "n": 3, "ok": True, "none": None, "x": 0.5},
    {"array": np.arange(3), "f32": np.float32(0.1), "i64": np.int64(7), "b": np.bool_(True)},
    {"tuple": (1, (2, 3)), "set": {4}, "frozen": frozenset({5})},
    {1: "int key", (2, 3): "tuple key", False: "bool key"},
    {"nan": float("nan"), "inf": float("inf"), "ninf": (-float("inf"),)},
    {"enum": Colour.RED, "enums": [Colour.BLUE], "uuid": uuid.UUID(int=5)},
    {"infinite enum": Limit.TOP},
    {"sub": Label("x"), "ordered": OrderedDict(a=1), "bytes": b"raw", "big": 2**70},
    {"deep": _nest(21, "list"), "deeper": _nest(300, "dict"), "tuples": _nest(300, "tuple")},
    {"cycle": _cycle()},
    {"object": object()},
]


@pytest.mark.parametrize("info", ODD_INFOS, ids=range(len(ODD_INFOS)))
def test_a_result_is_written_as_jsonable_then_dumps_write_it(info):
    result = {
        "observation": "o",
        "reward": 1.0,
        "terminated": False,
        "truncated": False,
        "info": info,
        "score": 1.0,
    }
    _same(encode(result), dumps(jsonable(result)))


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.sampled_from([Colour.RED, Colour.BLUE, uuid.UUID(int=9), np.float64(1.5), np.int32(4)]),
)
_KEYS = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.booleans())
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(_KEYS, _VALUES, max_size=6))
def test_any_info_is_written_as_jsonable_then_dumps_write_it(info):
    result = {"observation": "o", "info": info}
    _same(encode(result), dumps(jsonable(result)))


def test_an_autoreset_is_added_last_to_the_step_already_encoded():
    step = encode({"observation": "done", "terminated": True, "info": {"a": np.int64(1)}})
    assert type(step) is bytes
    assert json.loads(with_reset(step, {"observation": "new", "info": {}})) == {
        "observation": "done",
        "terminated": True,
        "info": {"a": 1},
        "reset": {"observation": "new", "info": {}},
    }
    assert json.loads(with_reset(step, None))["reset"] is None


def test_a_nest_as_deep_as_orjson_writes_is_walked_on_a_deep_stack():
    """jsonable walks plain containers one frame a level: the deepest nest orjson writes, and
    the cycle that stops at that depth, fit in the recursion limit on an already deep stack."""
    cycle: list = []
    cycle.append(cycle)

    def at_depth(frames: int, fn):
        return fn() if frames == 0 else at_depth(frames - 1, fn)

    assert json.loads(at_depth(500, lambda: encode({"i": _nest(300, "list")})))
    assert "[...]" in at_depth(500, lambda: encode({"c": cycle})).decode()


def test_a_lone_surrogate_in_a_result_is_written_as_its_escape():
    text = encode({"observation": "broken \ud800 text", "info": {}})
    assert text.isascii() and json.loads(text)["observation"] == "broken \ud800 text"


def test_a_batch_reply_puts_each_session_id_first_and_keeps_errors():
    ok = {"json": encode({"observation": "o", "info": {}})}
    error = {"error": {"code": "unknown_session", "message": "gone"}, "status": 404}
    reply = json.loads(batch_reply([3, 4, 5], [ok, error, {"json": b"{}"}]))
    assert reply == {
        "results": [
            {"session_id": 3, "observation": "o", "info": {}},
            {"session_id": 4, "error": {"code": "unknown_session", "message": "gone"}},
            {"session_id": 5},
        ]
    }
    assert list(reply["results"][0])[0] == "session_id"
    assert json.loads(batch_reply([], [])) == {"results": []}
