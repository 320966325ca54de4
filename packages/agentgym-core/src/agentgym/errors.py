"""Exceptions with a stable machine-readable code, shared by the server, the clients and the CLI."""

from __future__ import annotations

from typing import Any


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


class UnknownEnvError(AgentGymError, KeyError):
    code = "unknown_env"
    status = 404

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


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


def _rebuild(cls: type, message: str, code: str, status: int) -> AgentGymError:
    return cls(message, code=code, status=status)


def _reduce(self: AgentGymError):
    # Errors cross process boundaries (``serve --workers N``): keep code and status when pickled.
    return (_rebuild, (type(self), self.message, self.code, self.status))


AgentGymError.__reduce__ = _reduce  # type: ignore[method-assign]
