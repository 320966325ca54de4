"""``Simulator``: one ScienceWorld JVM and the py4j gateway to it.

We start the JVM ourselves and call the simulator's ``PythonInterface`` directly, with the jar and
task table of the ``scienceworld`` package, rather than through ``scienceworld.ScienceWorldEnv``:

- its ``step`` also fetches the look, inventory, task description and every valid action-object
  combination (thousands of strings on some maps, one py4j round trip each) on every step; here a
  step is three round trips, and the long lists are fetched only when asked for;
- without Java it fails with a py4j traceback; here ``JavaNotFoundError`` says what to install;
- it has no timeouts: a call the simulator never answers blocks forever. Here a watchdog stops the
  JVM of a call that overruns its deadline and the call raises ``SimulatorTimeout``;
- its JVM runs with the default collector, whose heap grows to gigabytes on a large machine
  (3.5 GB resident after a few hundred steps on 24 GB); the serial collector needs ~0.45 GB and
  was faster on two cores;
- its worlds are not reproducible within one JVM. ``load`` resets the simulator's id counter and
  random seed, but rooms and containers are hash sets of objects hashed by identity, and identity
  hashes come from a per-thread sequence that runs on across loads: the second time a task is
  loaded in the same JVM, objects may be listed in another order and temperatures may differ by a
  degree (6 of 24 sampled tasks). With ``deterministic`` (the default) every identity hash is the
  same (``-XX:hashCode=2``), so sets iterate in insertion order and a task id gives the same episode
  in any JVM, at any time; steps cost ~20% more.

The JVM runs py4j's gateway with ``--die-on-broken-pipe``: it exits when its stdin closes, i.e. when
the process that started it is gone, however that process ended (killed included).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from py4j.java_gateway import GatewayParameters, JavaGateway, find_jar_path
from py4j.protocol import Py4JError
from scienceworld.constants import BASEPATH, JAR_PATH

from agentgym_sciworld.java import INSTALL_HINT, JavaNotFoundError, find_java

DEFAULT_JAVA_OPTIONS: tuple[str, ...] = ("-XX:+UseSerialGC", "-Xmx1g")
DETERMINISTIC_OPTIONS: tuple[str, ...] = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
START_TIMEOUT = 120.0  # a cold JVM on a loaded 2-core machine took up to ~4 s
WATCHDOG_INTERVAL = 0.1

T = TypeVar("T")


class SimulatorError(RuntimeError):
    """The simulator failed: its JVM did not start, died, or raised."""


class SimulatorTimeout(SimulatorError, TimeoutError):
    """A call was not answered in time; the JVM has been stopped."""


class _Watchdog:
    """One thread per process, stopping the JVM of any simulator whose call has overrun its deadline.

    Arming costs a lock and a float per call; a timer thread per call or a socket timeout per gateway
    would cost a thread start per step, or one timeout for loading (seconds) and stepping alike."""

    def __init__(self) -> None:
        self._sims: weakref.WeakSet[Simulator] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, sim: Simulator) -> None:
        with self._lock:
            self._sims.add(sim)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sciworld-watchdog", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(WATCHDOG_INTERVAL)
            with self._lock:
                sims = list(self._sims)
            now = time.monotonic()
            for sim in sims:
                deadline = sim._deadline
                if deadline is not None and now > deadline:
                    sim._expire(deadline)


_watchdog = _Watchdog()


def _stop(proc: subprocess.Popen) -> None:
    """Kill and reap a JVM (also the finalizer of a simulator that was never closed)."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


def _drain(stream: Any, tail: deque, port: list[int], ready: threading.Event) -> None:
    """Read the JVM's output: the first all-digits line is the gateway's port; the rest is kept as a
    short tail for error messages. Reading to the end also keeps a chatty JVM from blocking on a full
    pipe."""
    try:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            if not port and line.isdigit():
                port.append(int(line))
                ready.set()
            elif line:
                tail.append(line)
    except (OSError, ValueError):  # closed under us
        pass
    ready.set()


class Simulator:
    """A ScienceWorld simulator in its own JVM, started now and stopped by ``close()``."""

    def __init__(
        self,
        *,
        java: str | None = None,
        java_options: Sequence[str] = DEFAULT_JAVA_OPTIONS,
        deterministic: bool = True,
        start_timeout: float = START_TIMEOUT,
    ):
        self.java = java or find_java()
        self._deadline: float | None = None
        self._lock = threading.Lock()
        self._timed_out = False  # set by the watchdog when it stopped the JVM
        self._closed = False
        self._output: deque[str] = deque(maxlen=40)
        classpath = os.pathsep.join((find_jar_path(), JAR_PATH))
        options = [*java_options, *(DETERMINISTIC_OPTIONS if deterministic else ())]
        command = [self.java, *options, "-cp", classpath, "py4j.GatewayServer", "--die-on-broken-pipe", "0"]
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=BASEPATH,
            )
        except OSError as exc:
            raise JavaNotFoundError(
                f"ScienceWorld needs Java: could not run {self.java!r} ({exc.strerror or exc}); {INSTALL_HINT}"
            ) from None
        self._finalizer = weakref.finalize(self, _stop, self.proc)
        port: list[int] = []
        ready = threading.Event()
        threading.Thread(
            target=_drain,
            args=(self.proc.stdout, self._output, port, ready),
            name="sciworld-jvm-output",
            daemon=True,
        ).start()
        if not ready.wait(start_timeout) or not port:
            self._finalizer()
            raise SimulatorError(
                f"the Java VM ({self.java}) did not start the simulator within {start_timeout:g} s "
                f"(exit code {self.proc.returncode}){self._tail()}"
            )
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port[0]))
        try:
            self._api = self.gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
        except Py4JError as exc:
            self.close()
            raise SimulatorError(
                f"the simulator failed to start on {self.java}: {exc}{self._tail()}"
            ) from None
        # Bound once: py4j builds a member object on every attribute access.
        api = self._api
        self._step, self._score, self._completed = api.step, api.getScore, api.getCompleted
        _watchdog.watch(self)

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def close(self) -> None:
        """Stop the JVM (idempotent). It is killed, not asked: it holds nothing worth saving, and a
        JVM stuck in a call would not answer a shutdown request."""
        if self._closed:
            return
        self._closed = True
        try:
            self.gateway.close()
        except Exception:  # noqa: BLE001 - sockets of a dead JVM
            pass
        self._finalizer()

    def _expire(self, deadline: float) -> None:
        with self._lock:
            if self._deadline != deadline:  # the call returned meanwhile
                return
            self._timed_out = True
            self._deadline = None
        if self.proc.poll() is None:
            self.proc.kill()

    def _tail(self) -> str:
        lines = list(self._output)[-8:]
        return ("; its output ended with: " + " | ".join(lines)) if lines else ""

    def _call(self, what: str, timeout: float, fn: Callable[[], T]) -> T:
        if self._closed:
            raise SimulatorError("the simulator is closed")
        if self.proc.poll() is not None:
            if self._timed_out:  # stopped by the watchdog just as the previous call returned
                raise SimulatorTimeout("the simulator overran a deadline; its JVM was stopped")
            raise SimulatorError(
                f"the simulator's JVM has exited (code {self.proc.returncode}){self._tail()}"
            )
        self._deadline = time.monotonic() + timeout
        try:
            return fn()
        except Py4JError as exc:
            if self._timed_out:
                self.close()
                raise SimulatorTimeout(
                    f"the simulator did not answer {what} within {timeout:g} s; its JVM was stopped"
                ) from None
            if self.proc.poll() is not None:
                self.close()
                raise SimulatorError(
                    f"the simulator's JVM died during {what} (exit code {self.proc.returncode}){self._tail()}"
                ) from None
            raise SimulatorError(f"the simulator failed on {what}: {exc}") from None
        finally:
            with self._lock:
                self._deadline = None

    # -- the simulator's API ------------------------------------------------------------------
    def load(self, task: str, variation: int, *, gold_path: bool = False, timeout: float = 300.0) -> None:
        """Load a task variation (and its world). The gold path costs up to seconds to generate."""
        self._call(
            f"load {task} {variation}", timeout, lambda: self._api.load(task, variation, "", gold_path)
        )

    def act(self, action: str, timeout: float) -> tuple[str, float, bool]:
        """One action: (observation, score in the simulator's -1..1 scale, completed)."""

        def run() -> tuple[str, float, bool]:
            return self._step(action), self._score(), self._completed()

        return self._call(repr(action[:80]), timeout, run)

    def task_description(self, timeout: float = 60.0) -> str:
        return self._call("the task description", timeout, self._api.getTaskDescription)

    def gold_path(self, timeout: float = 60.0) -> list[str]:
        """The gold action sequence of the task loaded with ``gold_path=True``."""
        return self._strings("the gold path", timeout, self._api.getGoldActionSequence)

    def action_templates(self, timeout: float = 60.0) -> list[str]:
        """Action templates (``open OBJ``, ``connect OBJ to OBJ``)."""
        return self._strings("the action templates", timeout, self._api.getPossibleActions)

    def objects(self, timeout: float = 60.0) -> list[str]:
        """Names of the objects the agent can refer to now."""
        return self._strings("the objects", timeout, self._api.getPossibleObjects)

    def valid_actions(self, timeout: float = 60.0) -> list[str]:
        """Every action-object combination valid now (hundreds to thousands), in one round trip."""
        data = self._call("the valid actions", timeout, self._api.getValidActionObjectCombinationsJSON)
        return [a["action"] for a in json.loads(data)["validActions"]]

    def task_names(self, timeout: float = 60.0) -> list[str]:
        return self._strings("the task names", timeout, self._api.getTaskNames)

    def max_variations(self, task: str, timeout: float = 60.0) -> int:
        return int(self._call("the variation count", timeout, lambda: self._api.getTaskMaxVariations(task)))

    def _strings(self, what: str, timeout: float, fn: Callable[[], Any]) -> list[str]:
        # A Java list iterated from Python costs a round trip per element; joined on the Java side
        # it is one. Tabs and newlines never occur inside the simulator's action or object names.
        joined = self._call(what, timeout, lambda: self.gateway.jvm.java.lang.String.join("\n", fn()))
        return joined.split("\n") if joined else []
