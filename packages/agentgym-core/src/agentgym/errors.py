"""Exceptions with a stable machine-readable code, shared by the server, the clients and the CLI."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
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
