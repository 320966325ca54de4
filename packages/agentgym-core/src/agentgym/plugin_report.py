"""What the plugin registry reports: a plugin's problems, and what each plugin is and registers
(``agentgym plugins``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PluginInfo:
    name: str
    distribution: str
    version: str
    module: str
    hooks: list[str] = field(default_factory=list)
    registers: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PluginProblem:
    """Something wrong with one plugin; what it concerns was skipped (see ``agentgym.plugins``)."""

    plugin: str
    distribution: str
    reason: str
    module: str = ""
    envs: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} from {self.distribution!r}: {self.reason}"
