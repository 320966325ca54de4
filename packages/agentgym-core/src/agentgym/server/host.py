"""``EnvHost``: the env instances of one shard (the server process, or one ``--workers`` process).

A host is synchronous and knows nothing of HTTP. Session ids are allocated by the session manager;
the host maps them to live env instances and turns every outcome into JSON-safe dicts or an
``AgentGymError`` with the right code.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from agentgym.env import TextEnv, close_quietly
from agentgym.errors import (
    AgentGymError,
    EnvCrashedError,
    EpisodeOverError,
    UnknownSessionError,
    UnknownTaskError,
)
from agentgym.plugins import get_env_spec
from agentgym.protocol import error_body, error_from, item_error, jsonable, reset_result, step_result
from agentgym.server.batches import step_batch
from agentgym.server.dialects import shape
from agentgym.server.encoding import encode, with_reset
from agentgym.server.messages import Answer, Op, ResetItem, ResetTo, StepItem
from agentgym.server.png import frame_png
from agentgym.server.slots import Ended, Guard, Slot
from agentgym.server.watchdog import Progress


class EnvHost:
    def __init__(self, env_names: list[str]):
        self.specs = {name: get_env_spec(name) for name in env_names}
        self.slots: dict[int, Slot] = {}
        self.free: dict[str, list[TextEnv]] = {name: [] for name in env_names}  # idle, for reuse
        self._lock = threading.Lock()
        #: what a shard runs for each operation it is sent
        self.ops = {
            Op.CREATE: self.create,
            Op.RESET: self.reset,
            Op.CLOSE: self.close,
            Op.DROP_IDLE: self.drop_idle,
            Op.STEP_MANY: self.step_many,
            Op.RESET_MANY: self.reset_many,
            Op.OBSERVATION: self.observation,
            Op.EXPERT_ACTION: self.expert_action,
            Op.RENDER_PNG: self.render_png,
        }

    # -- lifecycle ----------------------------------------------------------------------------
    def create(
        self,
        sid: int,
        env_name: str,
        task_id: int | None,
        seed: int | None,
        compat: bool = False,
        reuse: bool = False,
        tasks: list[int] | None = None,
    ) -> Any:
        """A session on an idle instance (``reuse``, as the manager says there is one) or a new one;
        ``tasks``: the task ids its autoresets take in turn."""
        spec = self.specs[env_name]
        with self._lock:
            env = self.free[env_name].pop() if reuse and self.free[env_name] else None
        if env is None:
            try:
                env = spec.make()
            except Exception as exc:
                raise EnvCrashedError(f"env {env_name!r} failed to start: {exc!r}") from exc
        slot = Slot(spec=spec, env=env, tasks=deque(tasks or ()))
        with self._lock:
            self.slots[sid] = slot
        try:
            return self._reset(sid, slot, task_id, seed, "create" if compat else None)
        except BaseException:
            self._drop(sid)
            raise

    def reset(self, sid: int, task_id: int | None, seed: int | None, compat: bool = False) -> Any:
        slot = self._slot(sid)
        return self._reset(sid, slot, task_id, seed, "reset" if compat else None)

    def _reset(
        self, sid: int, slot: Slot, task_id: int | None, seed: int | None, compat_route: str | None
    ) -> Any:
        with slot.lock:
            self._locked(sid, slot)
            return self._reset_held(sid, slot, task_id, seed, compat_route)

    def _reset_held(
        self,
        sid: int,
        slot: Slot,
        task_id: int | None,
        seed: int | None,
        compat_route: str | None,
        safe: bool = True,
    ) -> Any:
        """The reset, with the slot's lock held; ``safe``: its info made JSON-safe (else left to
        ``encode``, which makes it so only where it is not)."""
        options = {"task_id": task_id} if task_id is not None else None
        try:
            obs, info = slot.env.reset(seed=seed, options=options)
        except UnknownTaskError:  # no such task: its own code; the session stays open
            raise
        except ValueError as exc:  # a bad task id is the caller's fault, not a crash
            raise AgentGymError(str(exc), code="invalid_task", status=422) from exc
        except Exception as exc:
            self._drop(sid)
            raise EnvCrashedError(
                f"env {slot.spec.name!r} crashed on reset: {exc!r}; session closed"
            ) from exc
        slot.done, slot.expert, slot.info = False, None, info
        result = reset_result(obs, info, safe=safe)
        return result if compat_route is None else self._compat(slot, compat_route, result)

    def _autoreset(self, sid: int, slot: Slot, to: ResetTo) -> dict[str, Any] | None:
        """The reset a step that ended its episode asked for (with the slot's lock held); to the
        next of the session's ``tasks``, None when none is left. A failed reset is answered as an
        error body; the step's result stands."""
        task_id, seed = to.task_id, to.seed
        if to.next_task:
            if not slot.tasks:
                return None
            task_id = slot.tasks.popleft()
        try:
            return self._reset_held(sid, slot, task_id, seed, None, safe=False)
        except AgentGymError as exc:
            return error_body(exc.code, exc.message)

    @staticmethod
    def _compat(slot: Slot, route: str, result: dict[str, Any]) -> Any:
        """``result`` as the env's original AgentGym server answered ``route`` (see dialects.py)."""
        return jsonable(shape(slot.spec, slot.env, route, result))

    def close(self, sid: int, keep: bool = False) -> None:
        """End a session; ``keep``: its env instance waits in the free list for the next creation."""
        with self._lock:  # taken out at once: a second close finds nothing to close
            slot = self.slots.pop(sid, None)
        if slot is None:
            raise UnknownSessionError.of(sid)
        with slot.lock:  # never close an env while another thread steps it
            if keep:
                with self._lock:
                    self.free[slot.spec.name].append(slot.env)
                return
            close_quietly(slot.env)

    def abandon(self, sid: int) -> str:
        """Forget a session whose step hangs, without waiting for it (the lock is held by the hung
        call); its env instance is closed when that call returns, or now if it just has. Returns
        the session's env name ("?" if it was gone already)."""
        with self._lock:
            slot = self.slots.pop(sid, None)
        if slot is None:
            return "?"
        slot.abandoned = True
        if slot.lock.acquire(blocking=False):  # the call returned before it could see the flag
            try:
                if not slot.closed:
                    slot.closed = True
                    close_quietly(slot.env)
            finally:
                slot.lock.release()
        return slot.spec.name

    def drop_idle(self, env_name: str, count: int) -> None:
        """Close the ``count`` instances idle longest."""
        with self._lock:
            dropped, self.free[env_name] = self.free[env_name][:count], self.free[env_name][count:]
        for env in dropped:
            close_quietly(env)

    def close_all(self) -> None:
        for sid in list(self.slots):
            try:
                self.close(sid)
            except AgentGymError:
                pass
        for name in list(self.free):
            self.drop_idle(name, len(self.free[name]))

    def _drop(self, sid: int) -> None:
        """Forget and close a crashed session (called with the slot's lock held)."""
        with self._lock:
            slot = self.slots.pop(sid, None)
        if slot is not None:
            close_quietly(slot.env)

    def _slot(self, sid: int) -> Slot:
        try:
            return self.slots[sid]
        except KeyError:
            raise UnknownSessionError.of(sid) from None

    def _locked(self, sid: int, slot: Slot) -> None:
        """After waiting for a slot's lock: the session may have been closed meanwhile (or given up
        while this call waited: then its env is closed here, as nobody else will)."""
        if slot.abandoned and not slot.closed:
            slot.closed = True
            close_quietly(slot.env)
        if self.slots.get(sid) is not slot:
            raise UnknownSessionError.of(sid)

    # -- stepping -----------------------------------------------------------------------------
    def step(self, sid: int, action: str) -> bytes:
        """One step's result as JSON, or its error raised (for in-process callers)."""
        out = self.answer(StepItem(sid, action))
        if "error" in out:
            raise error_from(out["error"]["code"], out["error"]["message"], out["status"])
        return out["json"]

    def answer(self, item: StepItem) -> Answer:
        """One step's answer, ``{"json": <encoded result>}`` or its error: a failure loses this
        step only. When the step ends the episode and ``item.autoreset`` asks for it, the session
        is reset at once and the new episode's first ``{observation, info}`` comes back under
        ``"reset"`` (see ``_autoreset``)."""
        out = self.step_one(item)
        return self.finish_autoreset(out) if type(out) is Ended else out

    def step_one(self, item: StepItem) -> Answer | Ended:
        """A batch's item: :meth:`answer`, except that a step that ends its episode and asks for an
        autoreset comes back as an :class:`Ended` keeping the session's lock, the reset left to
        :meth:`finish_autoreset` (batches.py says why)."""
        slot = self.slots.get(item.sid)
        if slot is None:
            return item_error(UnknownSessionError.of(item.sid))
        slot.lock.acquire()
        return self._step_locked(item, slot)

    def try_step(self, item: StepItem) -> Answer | Ended | None:
        """:meth:`step_one`, or None at once (nothing done) if another call holds the session."""
        slot = self.slots.get(item.sid)
        if slot is None:
            return item_error(UnknownSessionError.of(item.sid))
        if not slot.lock.acquire(blocking=False):
            return None
        return self._step_locked(item, slot)

    def _step_locked(self, item: StepItem, slot: Slot) -> Answer | Ended:
        """``item`` stepped on ``slot``, whose lock the caller took: released here, unless an
        :class:`Ended` keeps it. (Every batched step's path, in one function: each call layer cost
        a measurable share of a cheap step.)"""
        sid, held = item.sid, False
        try:
            if slot.abandoned or self.slots.get(sid) is not slot:
                self._locked(sid, slot)
            if slot.done:
                raise EpisodeOverError(f"session {sid}: the episode has ended; reset it to start a new one")
            try:
                obs, reward, terminated, truncated, info = slot.env.step(item.action)
            except AgentGymError:
                raise
            except Exception as exc:
                self._drop(sid)
                name = slot.spec.name
                raise EnvCrashedError(f"env {name!r} crashed on step: {exc!r}; session closed") from exc
            finally:
                if slot.abandoned and not slot.closed:  # it came back after its session was given up
                    slot.closed = True
                    close_quietly(slot.env)
            slot.done = done = bool(terminated or truncated)
            slot.info = info
            result = step_result(obs, reward, terminated, truncated, info, slot.env.score, safe=item.compat)
            if item.compat:
                return {"json": encode(self._compat(slot, "step", result))}
            # encoded now, before any reset: the result holds the env's own info, which a reset may change
            text = encode(result)
            if item.autoreset is None or not done:
                return {"json": text}
            held = True
            return Ended(sid, slot, item.autoreset, text)
        except AgentGymError as exc:
            return item_error(exc)
        except Exception as exc:  # e.g. a result that is not JSON-encodable: lose only this item
            return item_error(AgentGymError(repr(exc), code="internal_error", status=500))
        finally:
            if not held:
                slot.lock.release()

    def finish_autoreset(self, ended: Ended) -> Answer:
        """The reset an :class:`Ended` step asked for, its lock released; the step's result, encoded
        (or its error, as any item's)."""
        return _one(self._reset_ended, (ended,))

    def _reset_ended(self, ended: Ended) -> bytes:
        try:  # encoded before the lock goes: another call may then change the env's info
            return with_reset(ended.json, self._autoreset(ended.sid, ended.slot, ended.autoreset))
        finally:
            ended.slot.lock.release()

    def step_many(
        self, items: list[StepItem], progress: Progress | None = None, guard: Guard | None = None
    ) -> list[Answer]:
        """Step several sessions, as :func:`agentgym.server.batches.step_batch` says."""
        return step_batch(self, items, progress, guard)

    def reset_many(self, items: list[ResetItem]) -> list[Answer]:
        """Reset several sessions; per-item errors. Each result is encoded here, in the shard (a
        worker process with --workers N), so that the server process only joins strings: encoding
        in parallel, and one string to pickle across the process boundary, not a nest of dicts."""
        return [_one(self.reset, item) for item in items]

    # -- extras -------------------------------------------------------------------------------
    def observation(self, sid: int, compat: bool = False) -> Any:
        slot = self._slot(sid)
        with slot.lock:  # not halfway through a step
            self._locked(sid, slot)
            observation = slot.env.last_observation
            if not compat:
                return observation
            return self._compat(slot, "observation", {"observation": observation})

    def expert_action(self, sid: int) -> str:
        slot = self._slot(sid)
        with slot.lock:
            if slot.spec.expert is None:
                raise AgentGymError(f"env {slot.spec.name!r} has no expert", code="no_expert", status=404)
            if slot.done:
                raise EpisodeOverError(f"session {sid}: the episode has ended")
            if slot.expert is None:
                slot.expert = slot.spec.make_expert(slot.env)
            return slot.expert(slot.env.last_observation, slot.info)

    def render_png(self, sid: int) -> bytes:
        slot = self._slot(sid)
        with slot.lock:
            env = slot.env
            previous = env.render_mode
            try:
                env.render_mode = "rgb_array"
                frame = env.render()
            except Exception as exc:
                raise AgentGymError(
                    f"env {slot.spec.name!r} failed to render: {exc!r}", code="render_failed"
                ) from exc
            finally:
                env.render_mode = previous
        return frame_png(slot.spec.name, frame)

    def stats(self) -> dict[str, int]:
        return {"sessions": len(self.slots)}


def _one(op: Any, item: tuple) -> Answer:
    """``op(*item)``'s result as ``{"json": <encoded>}`` (a result already JSON bytes kept as it
    is), or its error: a failure loses this item only."""
    try:
        result = op(*item)
        return {"json": result if type(result) is bytes else encode(result)}
    except AgentGymError as exc:
        return item_error(exc)
    except Exception as exc:  # e.g. a result that is not JSON-encodable: lose only this item
        return item_error(AgentGymError(repr(exc), code="internal_error", status=500))
