"""Frames of recorded episodes: the env's picture after each turn, re-created by replaying the
recorded actions in the installed env.

Episodes store text, not pictures. Task ids and seeds make every AgentGym env deterministic, so
resetting the env to the episode's task and stepping its recorded actions reaches the same states,
and ``render()`` in ``rgb_array`` mode draws them. The replay checks itself: each replayed
observation must equal the recorded one, else the installed env is not the one that played the
episode and its pictures would be of something else.

Everything here runs env code and blocks; the web routes call it through a thread pool.
"""

from __future__ import annotations

import base64
import binascii
import io
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Turns replayed at most: frames after later turns are not made (a runaway episode must not hold
#: a worker thread for minutes).
MAX_TURNS = 200
#: Episodes whose frames (or the reason there are none) are kept; a BabyAI frame is a few KB.
CACHED_EPISODES = 32
#: Env instances kept for replays, one per env name: making one can cost seconds (a JVM, a browser).
POOLED_ENVS = 3


def png_bytes(frame: Any) -> bytes | None:
    """A rendered ``rgb_array`` frame as PNG, or None when ``frame`` is not an image."""
    import numpy as np
    from PIL import Image

    if frame is None:
        return None
    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] not in (3, 4) or array.size == 0:
        return None
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def render_png(env: Any) -> bytes | str:
    """The env's current picture as PNG, or why there is none."""
    previous = getattr(env, "render_mode", None)
    try:
        env.render_mode = "rgb_array"
        frame = env.render()
    except Exception as exc:  # noqa: BLE001 - any env failure becomes a reason shown to the person
        return f"the env failed to render: {type(exc).__name__}: {exc}"
    finally:
        env.render_mode = previous
    png = png_bytes(frame)
    return png if png is not None else "the env does not render pictures"


def spec_reason(env_name: str) -> tuple[Any, str | None]:
    """The env's spec, and why its episodes can have no frames (None when they may).

    Decided without making the env where the class shows it: an env that keeps the base class's
    ``render`` draws nothing, and making one (a JVM for ScienceWorld) just to learn that is waste.
    """
    import agentgym
    from agentgym.env import TextEnv
    from agentgym.spec import resolve

    try:
        spec = agentgym.env_specs().get(env_name)
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the page down
        return None, f"env plugins failed to load: {exc}"
    if spec is None:
        return None, f"env {env_name!r} is not installed"
    try:
        factory = resolve(spec.factory)
    except Exception as exc:  # noqa: BLE001
        return spec, f"env {env_name!r} cannot be loaded: {type(exc).__name__}: {exc}"
    if isinstance(factory, type) and issubclass(factory, TextEnv) and factory.render is TextEnv.render:
        return spec, f"env {env_name!r} does not render pictures"
    return spec, None


class _EnvPool:
    """A few env instances by name, each lent to one replay at a time (envs are not thread-safe)."""

    def __init__(self, size: int):
        self.size = size
        self._envs: OrderedDict[str, tuple[Any, threading.Lock]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def borrow(self, spec: Any) -> Iterator[Any]:
        while True:
            with self._lock:
                entry = self._envs.get(spec.name)
                if entry is None:
                    entry = self._envs[spec.name] = (None, threading.Lock())
                self._envs.move_to_end(spec.name)
            lock = entry[1]
            lock.acquire()
            with self._lock:
                current = self._envs.get(spec.name)
            if current is not None and current[1] is lock:
                break
            lock.release()  # evicted (and closed) while this replay waited: take a fresh one
        try:
            env = current[0]
            if env is None:
                env = spec.make()
                with self._lock:
                    self._envs[spec.name] = (env, lock)
                    evicted = self._evict()
                for old in evicted:
                    _close(old)
            yield env
        finally:
            lock.release()

    def _evict(self) -> list[Any]:
        out = []
        while len(self._envs) > self.size:
            name = next(iter(self._envs))
            env, lock = self._envs[name]
            if not lock.acquire(blocking=False):
                break  # in use: evict it later rather than close it under a replay
            try:
                del self._envs[name]
            finally:
                lock.release()
            if env is not None:
                out.append(env)
        return out

    def close(self) -> None:
        with self._lock:
            envs = [env for env, _ in self._envs.values() if env is not None]
            self._envs.clear()
        for env in envs:
            _close(env)


def _close(env: Any) -> None:
    try:
        env.close()
    except Exception:  # noqa: BLE001, S110 - closing is best effort
        pass


_pool = _EnvPool(POOLED_ENVS)
_cache: OrderedDict[Any, list[bytes] | str] = OrderedDict()
_cache_lock = threading.Lock()
_episode_locks: dict[Any, threading.Lock] = {}


def recorded_frame(episode: Any, k: int) -> bytes | None:
    """The frame after turn ``k`` as the episode recorded it (``info["frame_png"]``, base64)."""
    if not 1 <= k <= len(episode.steps):
        return None
    data = episode.steps[k - 1].info.get("frame_png")
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def replay(spec: Any, episode: Any, env: Any) -> list[bytes] | str:
    """Reset ``env`` to the episode's task and step its recorded actions, rendering after each.

    Returns the PNG after turn k at index k (0: the initial state); shorter than the episode when
    it is longer than :data:`MAX_TURNS` or its env failed at its last turn.
    """
    try:
        env.reset(seed=episode.seed, options={"task_id": episode.task_id})
    except Exception as exc:  # noqa: BLE001
        return f"the env failed to reset to task {episode.task_id}: {type(exc).__name__}: {exc}"
    first = render_png(env)
    if isinstance(first, str):
        return first
    frames = [first]
    steps = episode.steps[:MAX_TURNS]
    for k, step in enumerate(steps, 1):
        if step.action is None:
            # A format error: the rollout sent nothing to the env, so the picture stays.
            frames.append(frames[-1])
            continue
        failed_here = episode.termination == "error" and k == len(episode.steps) and not step.observation
        try:
            observation, *_ = env.step(step.action)
        except Exception as exc:  # noqa: BLE001
            if failed_here:
                break  # it failed when played too: no state after this turn to draw
            return f"the replay failed at turn {k}: {type(exc).__name__}: {exc}"
        if failed_here:
            break
        if observation != step.observation:
            return (
                f"the replay diverges from the recording at turn {k} "
                f"(the installed env is not the one that played this episode): {_first_difference(step.observation, observation)}"
            )
        png = render_png(env)
        if isinstance(png, str):
            return png
        frames.append(png)
    return frames


def _first_difference(recorded: str, replayed: str) -> str:
    """The first line where two observations differ, as ``recorded ... / replayed ...``."""
    a, b = (recorded or "").splitlines(), (replayed or "").splitlines()
    for i in range(max(len(a), len(b))):
        x, y = (a[i] if i < len(a) else "<end>"), (b[i] if i < len(b) else "<end>")
        if x != y:
            return f"line {i + 1} recorded {x[:120]!r}, replayed {y[:120]!r}"
    return "they differ in line endings"


def frames_for(meta: dict[str, Any], episode: Any) -> list[bytes] | str:
    """The PNG frames of an episode (index k: after turn k, 0: the initial state), or why there
    are none. Replayed once per episode and cached; concurrent requests wait for one replay."""
    # The path and offset too: a rewritten file can give an id to another episode.
    key = (meta.get("id"), meta.get("path") or meta.get("file"), meta.get("offset"), len(episode.steps))
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
        lock = _episode_locks.setdefault(key, threading.Lock())
    with lock:
        with _cache_lock:
            if key in _cache:
                return _cache[key]
        result = _replay_episode(episode)
        with _cache_lock:
            _cache[key] = result
            while len(_cache) > CACHED_EPISODES:
                _cache.popitem(last=False)
            _episode_locks.pop(key, None)
    return result


def _replay_episode(episode: Any) -> list[bytes] | str:
    spec, reason = spec_reason(episode.env)
    if reason is not None:
        return reason
    try:
        with _pool.borrow(spec) as env:
            return replay(spec, episode, env)
    except Exception as exc:  # noqa: BLE001 - e.g. the env cannot start here (missing JVM)
        return f"env {episode.env!r} could not start: {type(exc).__name__}: {exc}"


def clear() -> None:
    """Forget cached frames and close pooled envs (tests; a server shutting down)."""
    with _cache_lock:
        _cache.clear()
        _episode_locks.clear()
    _pool.close()
