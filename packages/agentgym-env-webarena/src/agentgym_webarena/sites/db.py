"""SQLite schema of both sites, the pristine database, and the per-session copies.

One database file holds both sites (tables prefixed ``shop_`` and ``forum_``, plus the login
``sessions`` of both), so one episode's whole world is one file: resetting it is one copy.

``build_pristine(path)`` writes the database from ``data.py``; it is deterministic (same rows, same
ids, same order every time) and has no login sessions and no carts.

``Databases`` keeps the pristine file (built once per process, written into a private temp dir per
instance) and one copy per session token. A copy is a plain file copy (the file is a few hundred KB),
swapped in with ``os.replace`` so a request still holding the old file finishes on the old inode
instead of reading a half-copied one. Connections use an in-memory rollback journal for the same
reason: a stale ``-journal`` file next to a freshly copied database would be replayed onto it.

Passwords are stored as salted SHA-256 (``hash_password``/``check_password``); this is a toy site,
but it should not look like one in its own database.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import secrets
import shutil
import sqlite3
import tempfile
import threading
import weakref
from functools import cache
from pathlib import Path

from .data import Customer, ForumData, ShopData, forum_data, shop_data

SCHEMA = """
CREATE TABLE shop_categories (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE TABLE shop_products (
    id INTEGER PRIMARY KEY,
    category_id INTEGER NOT NULL REFERENCES shop_categories(id),
    name TEXT NOT NULL UNIQUE,
    slug TEXT NOT NULL UNIQUE,
    sku TEXT NOT NULL UNIQUE,
    price_cents INTEGER NOT NULL,
    description TEXT NOT NULL,
    stock INTEGER NOT NULL
);
CREATE TABLE shop_customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT NOT NULL,
    street TEXT NOT NULL,
    city TEXT NOT NULL,
    state TEXT NOT NULL,
    zip TEXT NOT NULL,
    country TEXT NOT NULL,
    phone TEXT NOT NULL
);
CREATE TABLE shop_reviews (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL REFERENCES shop_products(id),
    customer_id INTEGER REFERENCES shop_customers(id),
    author TEXT NOT NULL,
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE shop_orders (
    id INTEGER PRIMARY KEY,
    number TEXT NOT NULL UNIQUE,
    customer_id INTEGER NOT NULL REFERENCES shop_customers(id),
    created TEXT NOT NULL,
    status TEXT NOT NULL,
    ship_name TEXT NOT NULL,
    ship_street TEXT NOT NULL,
    ship_city TEXT NOT NULL,
    ship_state TEXT NOT NULL,
    ship_zip TEXT NOT NULL,
    ship_country TEXT NOT NULL,
    ship_phone TEXT NOT NULL,
    subtotal_cents INTEGER NOT NULL,
    shipping_cents INTEGER NOT NULL,
    total_cents INTEGER NOT NULL
);
CREATE TABLE shop_order_items (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES shop_orders(id) ON DELETE CASCADE,
    product_id INTEGER REFERENCES shop_products(id),
    name TEXT NOT NULL,
    sku TEXT NOT NULL,
    price_cents INTEGER NOT NULL,
    qty INTEGER NOT NULL
);
-- cart is 'customer:<id>' for a signed-in customer, 'guest:<cookie token>' otherwise
CREATE TABLE shop_cart_items (
    cart TEXT NOT NULL,
    product_id INTEGER NOT NULL REFERENCES shop_products(id),
    qty INTEGER NOT NULL CHECK (qty > 0),
    PRIMARY KEY (cart, product_id)
);
CREATE TABLE shop_wishlist (
    customer_id INTEGER NOT NULL REFERENCES shop_customers(id),
    product_id INTEGER NOT NULL REFERENCES shop_products(id),
    added TEXT NOT NULL,
    PRIMARY KEY (customer_id, product_id)
);
CREATE TABLE forum_forums (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE forum_users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT NOT NULL,
    bio TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE forum_posts (
    id INTEGER PRIMARY KEY,
    forum_id INTEGER NOT NULL REFERENCES forum_forums(id),
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    created TEXT NOT NULL,
    edited TEXT,
    score INTEGER NOT NULL DEFAULT 0  -- sum of forum_post_votes.value, kept in step by the app
);
CREATE TABLE forum_comments (
    id INTEGER PRIMARY KEY,
    post_id INTEGER NOT NULL REFERENCES forum_posts(id) ON DELETE CASCADE,
    parent_id INTEGER REFERENCES forum_comments(id) ON DELETE CASCADE,
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    body TEXT NOT NULL,
    created TEXT NOT NULL,
    score INTEGER NOT NULL DEFAULT 0  -- sum of forum_comment_votes.value
);
CREATE TABLE forum_post_votes (
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    post_id INTEGER NOT NULL REFERENCES forum_posts(id) ON DELETE CASCADE,
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    PRIMARY KEY (user_id, post_id)
);
CREATE TABLE forum_comment_votes (
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    comment_id INTEGER NOT NULL REFERENCES forum_comments(id) ON DELETE CASCADE,
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    PRIMARY KEY (user_id, comment_id)
);
CREATE TABLE forum_subscriptions (
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    forum_id INTEGER NOT NULL REFERENCES forum_forums(id),
    PRIMARY KEY (user_id, forum_id)
);
-- login sessions of both sites; site is 'shop' (user_id: shop_customers.id) or 'forum' (forum_users.id)
CREATE TABLE sessions (
    token TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    user_id INTEGER NOT NULL
);
CREATE INDEX shop_products_category ON shop_products(category_id);
CREATE INDEX shop_reviews_product ON shop_reviews(product_id);
CREATE INDEX shop_orders_customer ON shop_orders(customer_id);
CREATE INDEX shop_order_items_order ON shop_order_items(order_id);
CREATE INDEX forum_posts_forum ON forum_posts(forum_id);
CREATE INDEX forum_posts_user ON forum_posts(user_id);
CREATE INDEX forum_comments_post ON forum_comments(post_id);
CREATE INDEX forum_comments_user ON forum_comments(user_id);
"""

# Tables whose rows make up the sites' content, in creation order (what a determinism check compares).
TABLES = (
    "shop_categories",
    "shop_products",
    "shop_customers",
    "shop_reviews",
    "shop_orders",
    "shop_order_items",
    "shop_cart_items",
    "shop_wishlist",
    "forum_forums",
    "forum_users",
    "forum_posts",
    "forum_comments",
    "forum_post_votes",
    "forum_comment_votes",
    "forum_subscriptions",
    "sessions",
)


def hash_password(password: str, salt: str | None = None) -> str:
    """``sha256$<salt>$<hex digest>``; a fresh random salt unless one is given (the pristine data's are fixed)."""
    salt = secrets.token_hex(8) if salt is None else salt
    digest = hashlib.sha256(f"{salt}:{password}".encode()).hexdigest()
    return f"sha256${salt}${digest}"


def check_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a ``hash_password`` string."""
    try:
        _, salt, _ = stored.split("$", 2)
    except ValueError:
        return False
    return hmac.compare_digest(hash_password(password, salt), stored)


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
def _pristine_bytes() -> bytes:
    # Built once per process; every Databases instance then only writes these bytes to its own dir.
    with tempfile.TemporaryDirectory(prefix="agentgym-sites-build-") as directory:
        path = Path(directory) / "pristine.sqlite"
        build_pristine(path)
        return path.read_bytes()


def connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection to one site database: rows as ``sqlite3.Row``, foreign keys on, journal in memory."""
    db = sqlite3.connect(path, check_same_thread=False, timeout=5.0)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA journal_mode=MEMORY")
    db.execute("PRAGMA synchronous=OFF")
    return db


class Databases:
    """The pristine database and one copy of it per session token (thread-safe).

    ``open(token)``/``reset(token)`` give the token a fresh copy (re-copying over the one it had, which
    also signs every user out and empties every cart), ``drop`` deletes it, ``connect(token)`` opens a connection to it. Tokens are arbitrary strings; files are
    named by a counter, never by the token. ``DEFAULT`` ("default") is the copy the web apps use for
    requests without a session header; they open it on first use.
    """

    DEFAULT = "default"

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        if directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="agentgym-sites-"))
            # Remove our temp dir when this object goes away or at interpreter exit, whichever is first.
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.directory, True)
        else:
            self.directory = Path(directory)
            self.directory.mkdir(parents=True, exist_ok=True)
            self._cleanup = None
        self.pristine = self.directory / "pristine.sqlite"
        self.pristine.write_bytes(_pristine_bytes())
        self._paths: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._names = itertools.count(1)

    def _copy_to(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        shutil.copyfile(self.pristine, tmp)
        os.replace(tmp, path)

    def open(self, token: str) -> Path:
        """A fresh copy of the pristine database for ``token`` (replacing its current one, if any)."""
        with self._lock:
            path = self._paths.get(token)
            if path is None:
                path = self.directory / f"session-{next(self._names)}.sqlite"
            self._copy_to(path)
            self._paths[token] = path
            return path

    def reset(self, token: str) -> Path:
        """Restore ``token``'s database to the pristine state (the same as ``open``: a token seen for
        the first time gets its copy here, so an env can simply reset at every episode start)."""
        return self.open(token)

    def drop(self, token: str) -> None:
        """Delete ``token``'s database (no error if it has none)."""
        with self._lock:
            path = self._paths.pop(token, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def path(self, token: str) -> Path | None:
        """The file of ``token``'s database, or None if it is not open."""
        with self._lock:
            return self._paths.get(token)

    def tokens(self) -> list[str]:
        """The open tokens."""
        with self._lock:
            return list(self._paths)

    def __contains__(self, token: object) -> bool:
        with self._lock:
            return token in self._paths

    def connect(self, token: str, *, create: bool = False) -> sqlite3.Connection:
        """A new connection to ``token``'s database (opened first when ``create``; else ``KeyError`` if
        unknown). The caller closes it."""
        with self._lock:
            path = self._paths.get(token)
        if path is None:
            if not create:
                raise KeyError(token)
            with self._lock:
                # Another thread may have opened it meanwhile; only the first one copies.
                path = self._paths.get(token)
                if path is None:
                    path = self.directory / f"session-{next(self._names)}.sqlite"
                    self._copy_to(path)
                    self._paths[token] = path
        return connect(path)

    def close(self) -> None:
        """Drop every copy, and delete the directory if this object created it."""
        for token in self.tokens():
            self.drop(token)
        if self._cleanup is not None:
            self._cleanup()
