"""Exceptions with a stable machine-readable code, shared by the server, the clients and the CLI."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class AgentGymError(Exception):
    """An error with a ``code`` (stable, machine-readable) and an HTTP ``status``."""

    code = "agentgym_error"
    status = 500

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    def to_json(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


class PluginError(AgentGymError):
    code = "plugin_error"


class UnknownNameError(AgentGymError, KeyError):
    """A name that is not registered: an env, policy, algorithm, parser, reward transform...

    ``kind`` says what was looked up (``"policy"``), ``name`` the name asked for, ``known`` the
    registered names (sorted). A ``KeyError`` too, so code that catches a failed lookup keeps
    working. Raised by :func:`lookup`; the message lists the known names and the closest one.
    """

    code = "unknown_name"
    status = 404

    def __init__(
        self,
        message: str | None = None,
        *,
        kind: str = "name",
        name: str = "",
        known: Iterable[str] = (),
        code: str | None = None,
        status: int | None = None,
    ):
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        if message is None:
            message = unknown_name_message(kind, name, self.known)
        super().__init__(message, code=code, status=status)

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    """``unknown {kind} {name!r} (known: a, b, c)``, with the closest known name if one is close."""
    known = sorted(known)
    if not known:
        return f"unknown {kind} {name!r} (none registered)"
    message = f"unknown {kind} {name!r} (known: {', '.join(known)})"
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.7)
    return f"{message}; did you mean {close[0]!r}?" if close else message


def lookup(known: Mapping[str, T], name: str, kind: str, **kwargs: Any) -> T:
    """``known[name]``, or :class:`UnknownNameError` naming ``kind``, ``name`` and the known names.

    ``kwargs`` go to the error (``code="unknown_policy"`` keeps a more specific code).
    """
    try:
        if name in known:
            return known[name]
    except TypeError:  # an unhashable name is not registered either
        pass
    raise UnknownNameError(kind=kind, name=name, known=known, **kwargs)


class UnknownEnvError(UnknownNameError):
    code = "unknown_env"

    def __init__(self, message: str | None = None, *, kind: str = "env", **kwargs: Any):
        super().__init__(message, kind=kind, **kwargs)


class UnknownSessionError(AgentGymError, KeyError):
    code = "unknown_session"
    status = 404

    def __str__(self) -> str:
        return self.message

    @classmethod
    def of(cls, session_id: Any) -> UnknownSessionError:
        """The error for a session id the server does not hold: one message on every route (single
        and batched), whether the session was closed, expired or never made."""
        return cls(f"unknown session {session_id} (closed, expired, or never created)")


class UnknownTaskError(AgentGymError, ValueError):
    """A task id that names no task of the env: outside every split of a spec whose splits are
    finite (ids are never wrapped around onto other tasks). A ``ValueError`` too, as any bad task
    id given to ``reset``; over HTTP a 422 ``unknown_task``, and the session stays open.

    ``env`` and ``task_id`` say what was asked for (where known). :meth:`among` builds the message
    from the splits: ``unknown task id 3200 for guess: valid train 0..2999, test 3000..3199``.
    """

    code = "unknown_task"
    status = 422

    def __init__(
        self,
        message: str,
        *,
        env: str = "",
        task_id: int | None = None,
        code: str | None = None,
        status: int | None = None,
    ):
        super().__init__(message, code=code, status=status)
        self.env = env
        self.task_id = task_id

    @classmethod
    def among(cls, task_id: int, env: str, splits: Mapping[str, Sequence[int]]) -> UnknownTaskError:
        """The error for ``task_id``, in none of ``splits`` (name -> task ids) of ``env``."""
        return cls(
            f"unknown task id {task_id} for {env}: valid {valid_ids(splits)}", env=env, task_id=task_id
        )


def id_ranges(ids: Sequence[int]) -> list[tuple[int, int]]:
    """``ids`` as sorted inclusive runs ``(first, last)``: O(1) for a ``range`` of step 1."""
    if isinstance(ids, range) and ids.step == 1:
        return [(ids.start, ids.stop - 1)] if len(ids) else []
    runs: list[tuple[int, int]] = []
    for t in sorted(set(ids)):
        if runs and t == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], t)
        else:
            runs.append((t, t))
    return runs


def _runs_text(runs: list[tuple[int, int]]) -> str:
    return " and ".join(f"{a}..{b}" if a != b else str(a) for a, b in runs)


def valid_ids(splits: Mapping[str, Sequence[int]], max_runs: int = 3) -> str:
    """The ids of ``splits``, short: ``train 0..2999, test 3000..3199``; where a split's ids are
    scattered (more than ``max_runs`` runs), the runs of all splits together and each split's size
    (``0..547 (train 448 ids, test 100 ids)``), else each split's size and bounds."""
    runs = {name: id_ranges(ids) for name, ids in splits.items() if len(ids)}
    if not runs:
        return "none (the env declares no task)"
    if all(len(r) <= max_runs for r in runs.values()):
        return ", ".join(f"{name} {_runs_text(r)}" for name, r in runs.items())
    sizes = ", ".join(f"{name} {len(splits[name])} ids" for name in runs)
    union = _merge([run for r in runs.values() for run in r])
    if len(union) <= max_runs:
        return f"{_runs_text(union)} ({sizes})"
    return ", ".join(f"{name} {len(splits[name])} ids in {r[0][0]}..{r[-1][1]}" for name, r in runs.items())


def _merge(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class EpisodeOverError(AgentGymError):
    code = "episode_over"
    status = 409


class CapacityError(AgentGymError):
    """No room for another session; ``retry_after``: seconds after which trying again makes sense
    (sent as the ``Retry-After`` header)."""

    code = "at_capacity"
    status = 503

    def __init__(self, message: str, *, retry_after: float = 1.0, **kwargs: Any):
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class BadRequestError(AgentGymError):
    code = "bad_request"
    status = 422


class EnvCrashedError(AgentGymError):
    """The env instance raised; the session has been closed."""

    code = "env_crashed"
    status = 500


class ServerUnavailableError(AgentGymError):
    """A client could not reach any server after its retries."""

    code = "server_unavailable"
    status = 503


def _rebuild(cls: type, args: tuple, state: dict[str, Any]) -> AgentGymError:
    # Not through ``cls.__init__``: a subclass may take other arguments than the message.
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


def _reduce(self: AgentGymError):
    # Errors cross process boundaries (``serve --workers N``): keep the message, code, status and
    # every other attribute (``retry_after``, ``known``...) when pickled.
    return (_rebuild, (type(self), self.args, dict(self.__dict__)))


AgentGymError.__reduce__ = _reduce  # type: ignore[method-assign]
