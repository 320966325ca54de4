"""The fixed names the agent reads and writes for the bundled sites (``http://shopping.test``),
mapped to and from their real origins, which differ from one process to the next."""

from __future__ import annotations

import re
from collections.abc import Mapping

#: What the bundled sites are called in observations and actions (``.test`` is reserved: RFC 2606).
SHOWN_ORIGINS = {"shopping": "http://shopping.test", "reddit": "http://reddit.test"}


class OriginAliases:
    """Rewrites between the bundled sites' real origins and their shown names."""

    def __init__(self, real_to_shown: Mapping[str, str] | None = None):
        aliases = dict(real_to_shown or {})
        # a port is not followed by a digit, a name not by a name's character
        self._to_shown = [
            (re.compile(re.escape(real) + r"(?![0-9])"), shown) for real, shown in aliases.items()
        ]
        self._to_real = [
            (re.compile(re.escape(shown) + r"(?![\w-])", re.I), real) for real, shown in aliases.items()
        ]

    def to_shown(self, text: str) -> str:
        """``text`` with the bundled sites' real origins under their shown names."""
        for pattern, shown in self._to_shown:
            text = pattern.sub(shown, text)
        return text

    def to_real(self, text: str) -> str:
        """``text`` (an action) with the bundled sites' shown names as their real origins."""
        for pattern, real in self._to_real:
            text = pattern.sub(real, text)
        return text
