"""Finding the Java runtime the simulator runs on.

ScienceWorld is a Scala program: without a ``java`` executable, ``scienceworld`` fails deep inside
py4j (``FileNotFoundError: 'java'`` from ``Popen``, then an ``AttributeError`` from its
``__del__``). ``find_java`` looks first and says what is missing and how to get it.
"""

from __future__ import annotations

import os
import shutil

from agentgym import AgentGymError

#: An explicit Java executable; wins over ``JAVA_HOME`` and ``PATH``.
JAVA_ENV = "AGENTGYM_JAVA"

INSTALL_HINT = (
    "install a Java runtime (8 or newer), e.g. `apt-get install default-jre-headless` on Debian/Ubuntu, "
    f"or point {JAVA_ENV} at a java executable"
)


class JavaNotFoundError(AgentGymError):
    """No usable Java runtime: the simulator cannot start."""

    code = "java_missing"
    status = 503


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_java() -> str:
    """The java executable to run: ``$AGENTGYM_JAVA``, else ``$JAVA_HOME/bin/java``, else ``java`` on
    ``PATH``. Raises ``JavaNotFoundError`` naming what was looked at."""
    explicit = os.environ.get(JAVA_ENV)
    if explicit:
        found = explicit if _executable(explicit) else shutil.which(explicit)
        if not found:
            raise JavaNotFoundError(
                f"ScienceWorld needs Java: {JAVA_ENV}={explicit!r} is not an executable; {INSTALL_HINT}"
            )
        return found
    looked = []
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if _executable(candidate):
            return candidate
        looked.append(f"JAVA_HOME={java_home!r} has no bin/java")
    found = shutil.which("java")
    if found:
        return found
    looked.append("no `java` on PATH")
    raise JavaNotFoundError(
        f"ScienceWorld needs Java, and none was found ({'; '.join(looked)}): {INSTALL_HINT}"
    )
