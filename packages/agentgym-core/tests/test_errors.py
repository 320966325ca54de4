"""One error for every unknown name, and errors that survive pickling (``serve --workers N``)."""

from __future__ import annotations

import pickle

import pytest

from agentgym.errors import (
    AgentGymError,
    CapacityError,
    UnknownEnvError,
    UnknownNameError,
    UnknownSessionError,
    UnknownTaskError,
    id_ranges,
    lookup,
    valid_ids,
)


def test_lookup_returns_the_registered_object():
    assert lookup({"a": 1, "b": 2}, "b", "thing") == 2


def test_lookup_names_the_kind_the_name_and_the_known_ones():
    with pytest.raises(UnknownNameError) as exc:
        lookup({"grpo": 1, "gae": 2, "rloo": 3}, "grop", "algorithm")
    err = exc.value
    assert str(err) == "unknown algorithm 'grop' (known: gae, grpo, rloo); did you mean 'grpo'?"
    assert (err.kind, err.name, err.known) == ("algorithm", "grop", ["gae", "grpo", "rloo"])
    assert (err.code, err.status) == ("unknown_name", 404)
    # One line however it is caught: a KeyError would otherwise quote its message.
    assert isinstance(err, KeyError) and isinstance(err, AgentGymError) and isinstance(err, LookupError)
    assert err.to_json() == {"error": {"code": "unknown_name", "message": str(err)}}


def test_lookup_without_a_close_match_or_anything_registered():
    with pytest.raises(KeyError, match=r"^unknown policy 'zzz' \(known: hf, openai\)$"):
        lookup({"openai": 1, "hf": 2}, "zzz", "policy")
    with pytest.raises(UnknownNameError, match=r"^unknown policy 'hf' \(none registered\)$"):
        lookup({}, "hf", "policy")
    with pytest.raises(UnknownNameError, match="unknown thing"):
        lookup({"a": 1}, ["unhashable"], "thing")  # type: ignore[arg-type]


def test_lookup_keeps_a_more_specific_code():
    with pytest.raises(UnknownNameError) as exc:
        lookup({"hf": 1}, "nope", "policy", code="unknown_policy")
    assert exc.value.code == "unknown_policy" and exc.value.status == 404


def test_unknown_env_is_an_unknown_name_with_its_own_code_and_message():
    err = UnknownEnvError("unknown env 'x' (installed: guess)", name="x", known=["guess"])
    assert isinstance(err, UnknownNameError) and isinstance(err, KeyError)
    assert (err.code, err.status, err.kind, err.known) == ("unknown_env", 404, "env", ["guess"])
    assert str(err) == "unknown env 'x' (installed: guess)"
    # As the client rebuilds it from a server's answer: the message, code and status only.
    plain = UnknownEnvError("env 'x' is not served here", code="unknown_env", status=404)
    assert str(plain) == "env 'x' is not served here" and plain.known == []


class _WithRequiredArgs(AgentGymError):
    code = "custom"

    def __init__(self, what: str, count: int):
        super().__init__(f"{what} x{count}", status=418)
        self.what, self.count = what, count


@pytest.mark.parametrize(
    "err",
    [
        AgentGymError("plain", code="some_code", status=400),
        UnknownNameError(kind="algorithm", name="grop", known=["grpo", "gae"]),
        UnknownNameError(kind="policy", name="x", known=["hf"], code="unknown_policy"),
        UnknownEnvError("unknown env 'x' (installed: guess)", name="x", known=["guess"]),
        UnknownSessionError("unknown session 3"),
        CapacityError("full", retry_after=7.5),
        UnknownTaskError.among(12, "guess", {"test": range(10)}),
        _WithRequiredArgs("thing", 3),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_round_trip_through_pickle(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err) and back.args == err.args
    assert (back.message, back.code, back.status) == (err.message, err.code, err.status)
    assert vars(back) == vars(err)


def test_unknown_task_names_the_id_the_env_and_the_valid_ids():
    err = UnknownTaskError.among(3200, "guess", {"train": range(3000), "test": range(3000, 3200)})
    assert str(err) == "unknown task id 3200 for guess: valid train 0..2999, test 3000..3199"
    assert (err.code, err.status, err.env, err.task_id) == ("unknown_task", 422, "guess", 3200)
    assert isinstance(err, ValueError) and isinstance(err, AgentGymError)  # a bad task id, as before
    # as the client rebuilds it from a server's answer
    from agentgym.protocol import error_from

    back = error_from("unknown_task", str(err), 422)
    assert type(back) is UnknownTaskError and str(back) == str(err)


@pytest.mark.parametrize(
    ("splits", "text"),
    [
        ({"test": [4, 2, 3, 9]}, "test 2..4 and 9"),
        ({"test": range(5), "train": range(5, 5), "dev": [7]}, "test 0..4, dev 7"),
        # scattered ids (a seeded sample): the runs of all splits together, and each split's size
        (
            {"train": [t for t in range(548) if t % 5], "test": range(0, 548, 5)},
            "0..547 (train 438 ids, test 110 ids)",
        ),
        ({"a": range(0, 100, 2), "b": range(1001, 1100, 2)}, "a 50 ids in 0..98, b 50 ids in 1001..1099"),
        ({}, "none (the env declares no task)"),
    ],
)
def test_valid_ids_are_short_however_the_splits_lie(splits, text):
    assert valid_ids(splits) == text


def test_id_ranges_of_a_huge_range_take_no_time():
    assert id_ranges(range(10**15)) == [(0, 10**15 - 1)] and id_ranges(range(0)) == []
