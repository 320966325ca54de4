"""The embedded default sites of the WebArena-compatible env: a shop ("One Stop Market", standing in
for WebArena's Magento) and a forum ("Postmill", standing in for its Reddit clone).

Both are small, real web apps over one SQLite database per session (``db.Databases``), served on
loopback by ``server.SiteServer`` (``shared_sites()`` for the process-wide one). A browser context
picks its session's database with the ``X-AgentGym-Session`` header. The content is generated
deterministically in ``data/``; ``SHOP_ACCOUNTS`` and ``FORUM_ACCOUNTS`` are the login credentials
tasks can use.
"""

from .app import SESSION_HEADER
from .data.clock import SITE_NOW
from .data.forum import FORUM_ACCOUNTS, FORUM_NAME
from .data.shop import SHOP_ACCOUNTS, SHOP_NAME
from .db import Databases
from .forum import create_forum_app
from .pristine import build_pristine
from .server import SiteServer, shared_sites
from .shop import create_shop_app

__all__ = [
    "FORUM_ACCOUNTS",
    "FORUM_NAME",
    "SESSION_HEADER",
    "SHOP_ACCOUNTS",
    "SHOP_NAME",
    "SITE_NOW",
    "Databases",
    "SiteServer",
    "build_pristine",
    "create_forum_app",
    "create_shop_app",
    "shared_sites",
]
