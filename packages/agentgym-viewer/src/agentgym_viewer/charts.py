"""Line charts as SVG coordinates, computed here and written out by ``templates/_chart.html``.

No chart library, no script, nothing for the Content-Security-Policy to allow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

#: a value's coordinate on one axis
Scale = Callable[[float], float]


def _ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """About ``n`` round values covering [lo, hi] (whole numbers only if ``integer``: steps)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1, round(step))
    first = math.ceil(lo / step - 1e-9) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def _label(v: float, step: float | None = None) -> str:
    """A tick or point label; with ``step`` (the tick spacing) as many decimals as it needs, so
    neighbouring ticks never read the same."""
    if step:
        step = round(abs(step), 12)  # a difference of two ticks: 0.0001 may come out 0.0000999...
    if step and 1e-4 <= step < 1 and abs(v) < 1e6:
        decimals = max(0, -math.floor(math.log10(step)))
        if round(step, decimals) != step:
            decimals += 1  # 0.25
        return f"{v:,.{decimals}f}"
    if v == int(v) and abs(v) < 1e6:
        return f"{int(v):,}"
    return f"{v:.3g}"


def _tick_labels(values: list[float], scale: Scale) -> list[tuple[float, str]]:
    step = values[1] - values[0] if len(values) > 1 else None
    return [(scale(v), _label(v, step)) for v in values]


def _bounds(
    points: list[tuple[float, float]], y_range: tuple[float, float] | None
) -> tuple[float, float, float, float]:
    """The x and y ranges a chart spans: its points', widened to ``y_range``, never empty."""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = y_range if y_range else (min(ys), max(ys))
    y0, y1 = min(y0, min(ys)), max(y1, max(ys))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        pad = abs(y0) * 0.1 or 0.5
        y0, y1 = y0 - pad, y1 + pad
    return x0, x1, y0, y1


def _polylines(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]], sx: Scale, sy: Scale
) -> list[dict]:
    lines = []
    for i, (label, pts) in enumerate(series):
        if not pts:
            continue
        lines.append(
            {
                "label": label,
                "cls": f"series-{i % 6}",
                "points": " ".join(f"{sx(x)},{sy(y)}" for x, y in pts),
                # one point makes no line: mark every point of short series
                "marks": [(sx(x), sy(y), f"{label}: step {_label(x)}, {_label(y)}") for x, y in pts]
                if len(pts) <= 40
                else [],
            }
        )
    return lines


def chart(
    key: str,
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    dots: Sequence[tuple[str, Sequence[tuple[float, float]]]] = (),
    y_range: tuple[float, float] | None = None,
    width: int = 520,
    height: int = 220,
) -> dict[str, Any]:
    """Coordinates of a line chart (steps on x): polylines, dots, ticks and a legend."""
    left, right, top, bottom = 56, width - 12, 12, height - 30
    points = [p for _, pts in (*series, *dots) for p in pts]
    out: dict[str, Any] = {"id": f"chart-{key}", "title": title, "width": width, "height": height}
    if not points:
        return {**out, "empty": True}
    x0, x1, y0, y1 = _bounds(points, y_range)

    def sx(x: float) -> float:
        return round(left + (x - x0) / (x1 - x0) * (right - left), 1)

    def sy(y: float) -> float:
        return round(bottom - (y - y0) / (y1 - y0) * (bottom - top), 1)

    lines = _polylines(series, sx, sy)
    markers = [
        (sx(x), sy(y), f"{label}: step {_label(x)}, {_label(y)}") for label, pts in dots for x, y in pts
    ]
    return {
        **out,
        "empty": False,
        "box": {"left": left, "right": right, "top": top, "bottom": bottom},
        "xticks": _tick_labels([v for v in _ticks(x0, x1, 6, integer=True) if x0 <= v <= x1], sx),
        "yticks": _tick_labels([v for v in _ticks(y0, y1, 5) if y0 <= v <= y1], sy),
        "lines": lines,
        "dots": markers,
        "dots_label": dots[0][0] if dots else None,
        "legend": len(lines) > 1 or bool(markers),
    }


def metric_points(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """``(step, value)`` of each metrics row with a finite number under ``key``."""
    pts = []
    for row in rows:
        x, y = row.get("step"), row.get(key)
        if isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(y, bool):
            if math.isfinite(float(y)):
                pts.append((float(x), float(y)))
    return pts
