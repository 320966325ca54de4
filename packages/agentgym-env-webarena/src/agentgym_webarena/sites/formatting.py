"""How the sites write money and dates; registered as Jinja filters by ``rendering.make_templates``."""

from __future__ import annotations

from datetime import datetime


def money(cents: int) -> str:
    """``2499`` -> ``"$24.99"``, ``123456`` -> ``"$1,234.56"``."""
    sign = "-" if cents < 0 else ""
    return f"{sign}${abs(cents) // 100:,}.{abs(cents) % 100:02d}"


def long_date(stamp: str) -> str:
    """``"2023-03-04 19:01:00"`` -> ``"Mar 4, 2023"``."""
    moment = datetime.fromisoformat(stamp)
    return f"{moment:%b} {moment.day}, {moment.year}"


def date_time(stamp: str) -> str:
    """``"2023-03-04 19:01:00"`` -> ``"Mar 4, 2023 at 19:01"``."""
    moment = datetime.fromisoformat(stamp)
    return f"{long_date(stamp)} at {moment:%H:%M}"
