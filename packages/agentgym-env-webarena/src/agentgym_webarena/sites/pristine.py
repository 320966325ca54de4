"""The pristine database: both sites' schema and generated content, written by ``build_pristine``.

The build is deterministic (same rows, same ids, same order every time: the accounts' salts are
fixed too) and has no login sessions and no carts. ``pristine_bytes()`` builds it once per process.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from functools import cache
from pathlib import Path

from .data.forum import ForumData, forum_data
from .data.shop import Customer, ShopData, shop_data
from .passwords import hash_password
from .schema import SCHEMA


def _fixed_salt(login: str) -> str:
    # Deterministic salt for the generated accounts, so the pristine file is the same on every build.
    return hashlib.sha256(f"agentgym-sites:{login}".encode()).hexdigest()[:16]


def _address(c: Customer) -> tuple[str, str, str, str, str, str]:
    return (c.street, c.city, c.state, c.zip, c.country, c.phone)


def _insert_shop(db: sqlite3.Connection, shop: ShopData) -> None:
    db.executemany(
        "INSERT INTO shop_categories VALUES (?, ?, ?, ?)",
        [(c.id, c.slug, c.name, c.description) for c in shop.categories],
    )
    db.executemany(
        "INSERT INTO shop_products VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (p.id, p.category_id, p.name, p.slug, p.sku, p.price_cents, p.description, p.stock)
            for p in shop.products
        ],
    )
    db.executemany(
        "INSERT INTO shop_customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (c.id, c.name, c.email, hash_password(c.password, _fixed_salt(c.email)), *_address(c))
            for c in shop.customers
        ],
    )
    db.executemany(
        "INSERT INTO shop_reviews VALUES (?, ?, NULL, ?, ?, ?, ?, ?)",
        [(r.id, r.product_id, r.author, r.rating, r.title, r.body, r.created) for r in shop.reviews],
    )
    customers = {c.id: c for c in shop.customers}
    item_rows = []
    for order in shop.orders:
        c = customers[order.customer_id]
        head = (order.id, order.number, c.id, order.created, order.status, c.name, *_address(c))
        db.execute(
            "INSERT INTO shop_orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*head, order.subtotal_cents, order.shipping_cents, order.total_cents),
        )
        item_rows += [(order.id, i.product_id, i.name, i.sku, i.price_cents, i.qty) for i in order.items]
    db.executemany(
        "INSERT INTO shop_order_items (order_id, product_id, name, sku, price_cents, qty) VALUES (?, ?, ?, ?, ?, ?)",
        item_rows,
    )


def _insert_forum(db: sqlite3.Connection, forum: ForumData) -> None:
    db.executemany(
        "INSERT INTO forum_forums VALUES (?, ?, ?, ?, ?)",
        [(f.id, f.name, f.title, f.description, f.created) for f in forum.forums],
    )
    db.executemany(
        "INSERT INTO forum_users VALUES (?, ?, ?, ?, ?)",
        [
            (u.id, u.username, hash_password(u.password, _fixed_salt(u.username)), u.bio, u.created)
            for u in forum.users
        ],
    )
    # A post's or comment's score is the sum of its votes.
    post_scores: dict[int, int] = {}
    for vote in forum.post_votes:
        post_scores[vote.target_id] = post_scores.get(vote.target_id, 0) + vote.value
    comment_scores: dict[int, int] = {}
    for vote in forum.comment_votes:
        comment_scores[vote.target_id] = comment_scores.get(vote.target_id, 0) + vote.value
    db.executemany(
        "INSERT INTO forum_posts VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
        [
            (p.id, p.forum_id, p.user_id, p.title, p.body, p.created, post_scores.get(p.id, 0))
            for p in forum.posts
        ],
    )
    db.executemany(
        "INSERT INTO forum_comments VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (c.id, c.post_id, c.parent_id, c.user_id, c.body, c.created, comment_scores.get(c.id, 0))
            for c in forum.comments
        ],
    )
    db.executemany(
        "INSERT INTO forum_post_votes VALUES (?, ?, ?)",
        [(v.user_id, v.target_id, v.value) for v in forum.post_votes],
    )
    db.executemany(
        "INSERT INTO forum_comment_votes VALUES (?, ?, ?)",
        [(v.user_id, v.target_id, v.value) for v in forum.comment_votes],
    )
    db.executemany("INSERT INTO forum_subscriptions VALUES (?, ?)", forum.subscriptions)


def build_pristine(path: str | os.PathLike[str]) -> None:
    """Write the whole database (schema and generated content of both sites) to ``path``, replacing it."""
    path = Path(path)
    tmp = path.with_name(path.name + ".building")
    tmp.unlink(missing_ok=True)
    shop, forum = shop_data(), forum_data()
    db = sqlite3.connect(tmp)
    try:
        db.execute("PRAGMA journal_mode=OFF")
        db.executescript(SCHEMA)
        _insert_shop(db, shop)
        _insert_forum(db, forum)
        db.commit()
    finally:
        db.close()
    os.replace(tmp, path)


@cache
def pristine_bytes() -> bytes:
    # Built once per process; every Databases instance then only writes these bytes to its own dir.
    with tempfile.TemporaryDirectory(prefix="agentgym-sites-build-") as directory:
        path = Path(directory) / "pristine.sqlite"
        build_pristine(path)
        return path.read_bytes()
