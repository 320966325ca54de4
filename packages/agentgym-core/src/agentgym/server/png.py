"""A rendered frame as PNG bytes (``GET /v1/sessions/{id}/render``), with the standard library only."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from agentgym.errors import AgentGymError


def frame_png(env_name: str, frame: Any) -> bytes:
    """An env's rendered frame as PNG, or 404 ``no_render`` when it is not an HxWx3/4 image."""
    shape = getattr(frame, "shape", None)
    if shape is None or len(shape) != 3 or shape[2] not in (3, 4):
        raise AgentGymError(f"env {env_name!r} does not render images", code="no_render", status=404)
    return encode_png(frame)


def encode_png(frame: Any) -> bytes:
    """Encode an HxWx3 (or HxWx4) uint8 array as PNG with the standard library only."""
    rows = frame.tolist() if hasattr(frame, "tolist") else frame
    height, width = len(rows), len(rows[0])
    channels = len(rows[0][0])
    color_type = {3: 2, 4: 6}[channels]
    raw = b"".join(b"\x00" + bytes(v for px in row for v in px) for row in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )
