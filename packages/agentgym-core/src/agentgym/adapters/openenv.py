"""OpenEnv's protocol (``openenv-core`` 0.3) for any installed AgentGym env, in-process or served by
``agentgym serve --openenv``; OpenEnv's own clients (``GenericEnvClient``, an ``EnvClient`` subclass,
and what is built on them) reset and step it unchanged.

- ``environment(name)``: an OpenEnv ``Environment`` over ``agentgym.make(name)``;
  ``create_app(name)``: OpenEnv's own FastAPI app (``openenv.core.env_server.create_fastapi_app``)
  serving it at its root; ``mount(app, names)``: one such app per env under ``/openenv/<name>``, which
  ``agentgym serve --openenv`` does. A client's base URL is then ``http://HOST:PORT/openenv/<name>``
  (its WebSocket ``.../openenv/<name>/ws``; ``/reset``, ``/step``, ``/state``, ``/schema``,
  ``/metadata``, ``/health`` beside it).
- An action is ``{"message": TEXT}`` (``AgentGymAction``), given to ``env.step`` as it is::

      with GenericEnvClient(base_url="http://127.0.0.1:36001/openenv/babyai").sync() as env:
          result = env.reset(task_id=3)  # result.observation["text"], ["info"]
          result = env.step({"message": "turn left"})  # .reward, .done; ["terminated"]...
- ``reset(seed=, task_id=, episode_id=, **options)``: ``env.reset(seed=seed, options={"task_id":
  task_id, **options})``; its observation has ``reward`` None and ``done`` False.
- An observation (``AgentGymObservation``): ``text``, ``reward`` (the step's, as in-process),
  ``done`` (``terminated or truncated``), ``terminated``, ``truncated``, ``info`` and ``score`` (the
  return so far); ``metadata`` holds ``terminated``, ``truncated`` and ``info`` too, in-process
  (OpenEnv's wire format leaves ``metadata`` out, hence the fields).
- An invalid action is an observation (``info["valid_action"]`` False, reward 0), as in AgentGym.
- Errors are errors, never a reward: an ``AgentGymError`` whose text starts with its code
  (``unknown_task``, ``invalid_task``, ``episode_over``, ``env_crashed``...). Over the WebSocket,
  OpenEnv's client raises ``RuntimeError("Server error: <code>: <message> (code: EXECUTION_ERROR)")``;
  over OpenEnv's HTTP routes, the status and ``{"error": {"code", "message"}}`` body of
  ``agentgym serve``. A crashed env instance is dropped; the next reset makes a new one.

What does not map:

- OpenEnv's ``timeout_s``: not enforced. ``agentgym serve``'s ``--workers``, ``--max-instances``,
  ``--ttl`` and ``--step-timeout`` hold its own sessions only: an OpenEnv session is one env instance
  on a thread of the server process, living as long as its WebSocket; ``--capacity`` bounds the
  OpenEnv sessions of each env (OpenEnv's ``max_concurrent_envs``).
- OpenEnv's HTTP ``/reset`` and ``/step`` are stateless (a fresh env per request, as on OpenEnv's own
  servers): ``/reset`` answers a first observation, ``/step`` has no episode (``episode_over``).
  Episodes go over ``/ws``, as ``EnvClient`` plays them.
- ``--token`` guards the OpenEnv routes too, the WebSocket handshake included; OpenEnv's
  ``EnvClient`` sends no ``Authorization`` header, so it connects to a server without a token only.
- Rubrics, transforms, MCP tools, OpenEnv's web UI, frames (``render``), the expert and AgentGym's
  reward transforms: none are offered.
"""

from __future__ import annotations

import functools
import uuid
from types import SimpleNamespace
from typing import Any

from agentgym.adapters import require
from agentgym.errors import AgentGymError, EnvCrashedError, EpisodeOverError
from agentgym.protocol import error_body, jsonable

__all__ = ["PREFIX", "check_installed", "create_app", "environment", "mount"]  # and the lazy _TYPES

#: Where ``mount`` puts each env's OpenEnv app: ``/openenv/<name>``.
PREFIX = "/openenv"
_TYPES = ("AgentGymAction", "AgentGymObservation", "AgentGymEnvironment")


def check_installed() -> None:
    """Raise an ``AgentGymError`` saying which extra to install when openenv-core is missing."""
    try:
        require("openenv.core.env_server", "openenv")
    except ImportError as exc:
        raise AgentGymError(str(exc), code="missing_extra", status=2) from None


def environment(env: str, **kwargs: Any) -> Any:
    """An OpenEnv ``Environment`` playing the installed env ``env`` in-process (``kwargs`` go to
    ``agentgym.make``; the instance is made at the first reset)."""
    from agentgym.plugins import get_env_spec

    get_env_spec(env)  # an unknown name fails here, not at the first reset
    return _types().Environment(env, **kwargs)


def create_app(env: str, *, max_concurrent_envs: int = 1024, **kwargs: Any) -> Any:
    """OpenEnv's own FastAPI app serving the installed env ``env`` at its root (one env instance per
    WebSocket session, at most ``max_concurrent_envs``); ``kwargs`` go to ``agentgym.make``."""
    types = _types()
    environment(env)  # checks the name
    app = types.server.create_fastapi_app(
        functools.partial(types.Environment, env, **kwargs),
        types.Action,
        types.Observation,
        max_concurrent_envs=max_concurrent_envs,
    )
    app.title = f"AgentGym {env} (OpenEnv)"

    from fastapi.responses import JSONResponse

    async def _agentgym_error(request: Any, exc: AgentGymError) -> Any:  # the server's error answer
        return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status)

    app.add_exception_handler(AgentGymError, _agentgym_error)
    return app


def mount(app: Any, env_names: list[str], *, capacity: int = 1024, token: str | None = None) -> None:
    """Mount ``create_app(name)`` on ``app`` at ``/openenv/<name>`` for each of ``env_names``; with
    ``token``, its WebSocket handshake needs ``Authorization: Bearer <token>`` (``app``'s own guard
    checks HTTP requests)."""
    for name in env_names:
        app.mount(f"{PREFIX}/{name}", _WebSocketGuard(create_app(name, max_concurrent_envs=capacity), token))


class _WebSocketGuard:
    """The bearer token on an app's WebSocket handshakes (refused with 403), as plain ASGI."""

    def __init__(self, app: Any, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self.token is not None and scope["type"] == "websocket":
            import hmac

            scheme, _, value = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token.encode()):
                await receive()  # websocket.connect
                return await send({"type": "websocket.close", "code": 1008})
        await self.app(scope, receive, send)


def __getattr__(name: str) -> Any:
    """``AgentGymAction``, ``AgentGymObservation``, ``AgentGymEnvironment``: built at first use, openenv
    imported then."""
    if name in _TYPES:
        return getattr(_types(), name.removeprefix("AgentGym"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _types() -> SimpleNamespace:
    core = require("openenv.core.env_server", "openenv")
    from openenv.core.env_server.types import EnvironmentMetadata
    from pydantic import Field

    class AgentGymAction(core.Action):
        """One text action, given to the env's ``step`` as it is."""

        message: str = Field(..., description="The action text.")

    class AgentGymObservation(core.Observation):
        """An AgentGym observation; ``done`` is ``terminated or truncated``."""

        text: str = Field(default="", description="The env's observation text.")
        terminated: bool = Field(default=False, description="The episode ended in the env.")
        truncated: bool = Field(default=False, description="The episode was cut short.")
        info: dict[str, Any] = Field(default_factory=dict, description="The env's info, as JSON.")
        score: float = Field(default=0.0, description="The episode's return so far.")

    env_class = type(
        "AgentGymEnvironment",
        (_EnvironmentMixin, core.Environment),
        {"SUPPORTS_CONCURRENT_SESSIONS": True, "__doc__": _EnvironmentMixin.__doc__},
    )
    return SimpleNamespace(
        server=core,
        Metadata=EnvironmentMetadata,
        Action=AgentGymAction,
        Observation=AgentGymObservation,
        Environment=env_class,
    )


class _EnvironmentMixin:
    """An installed AgentGym env as an OpenEnv ``Environment``: ``reset(seed=, task_id=, episode_id=,
    **options)``, ``step(AgentGymAction(message=...))``, ``state``."""

    def __init__(self, env: str, **kwargs: Any):
        super().__init__()
        self.env_name, self._kwargs, self._env = env, kwargs, None
        self._state = _types().server.State(env=env)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: int | None = None,
        **options: Any,
    ) -> Any:
        env = self._instance()
        if task_id is not None:
            options["task_id"] = task_id
        try:
            text, info = env.reset(seed=seed, options=options or None)
        except AgentGymError as exc:
            raise _coded(exc) from None
        except ValueError as exc:  # a bad task id or seed is the caller's fault, not a crash
            raise _coded(AgentGymError(str(exc), code="invalid_task", status=422)) from exc
        except Exception as exc:
            raise self._crashed("reset", exc) from exc
        self._state = _types().server.State(
            episode_id=episode_id or str(uuid.uuid4()), step_count=0, env=self.env_name, task_id=env.task_id
        )
        return self._observation(text, None, False, False, info)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if self._env is None:
            raise _coded(EpisodeOverError("call reset() before step()"))
        text = action.message if hasattr(action, "message") else action
        try:
            observation, reward, terminated, truncated, info = self._env.step(text)
        except AgentGymError as exc:
            raise _coded(exc) from None
        except Exception as exc:
            raise self._crashed("step", exc) from exc
        self._state.step_count += 1
        return self._observation(observation, float(reward), terminated, truncated, info)

    @property
    def state(self) -> Any:
        return self._state

    def get_metadata(self) -> Any:
        from agentgym.plugins import get_env_spec

        spec = get_env_spec(self.env_name)
        return _types().Metadata(
            name=self.env_name, description=spec.description or spec.title, version=str(spec.version)
        )

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - a broken env's close changes nothing for the caller
                pass

    def _instance(self) -> Any:
        if self._env is None:
            import agentgym

            try:
                self._env = agentgym.make(self.env_name, **self._kwargs)
            except AgentGymError as exc:
                raise _coded(exc) from None
            except Exception as exc:
                raise _coded(EnvCrashedError(f"env {self.env_name!r} failed to start: {exc!r}")) from exc
        return self._env

    def _crashed(self, where: str, exc: Exception) -> AgentGymError:
        self.close()
        message = f"env {self.env_name!r} crashed on {where}: {exc!r}; the next reset makes a new instance"
        return _coded(EnvCrashedError(message))

    def _observation(
        self, text: str, reward: float | None, terminated: Any, truncated: Any, info: dict
    ) -> Any:
        info = jsonable(info)
        ends = {"terminated": bool(terminated), "truncated": bool(truncated)}
        return _types().Observation(
            text=text,
            reward=reward,
            done=ends["terminated"] or ends["truncated"],
            info=info,
            score=float(self._env.score) if self._env is not None else 0.0,
            metadata={**ends, "info": info},
            **ends,
        )


def _coded(exc: AgentGymError) -> AgentGymError:
    """``exc``, its text starting with its code (what OpenEnv's client shows of a server error)."""
    if not str(exc).startswith(f"{exc.code}: "):
        exc.args = (f"{exc.code}: {exc.message}",)
    return exc
