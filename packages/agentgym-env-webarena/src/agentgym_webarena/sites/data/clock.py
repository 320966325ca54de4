"""The sites' frozen present, ``SITE_NOW``, and the timestamps the generated content is stamped with.

``SITE_NOW`` is "now" for both sites: orders placed and posts written during an episode are stamped
from it, not from the wall clock, which keeps pages reproducible.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

SITE_NOW = datetime(2023, 6, 15, 12, 0, 0)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def random_moment(rng: random.Random, start: datetime, end: datetime) -> datetime:
    seconds = int((end - start).total_seconds())
    return start + timedelta(seconds=rng.randrange(seconds) // 60 * 60)
