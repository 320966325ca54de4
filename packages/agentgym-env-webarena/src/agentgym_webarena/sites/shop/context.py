"""The shop's request context (``ShopContext``: the signed-in customer, the cart, the page layout),
its settings, and the product and cart lookups its handlers share.
"""

from __future__ import annotations

import secrets
import sqlite3
from typing import Any

from ..auth import AccountContext, Accounts
from ..data.shop import SHOP_NAME
from ..errors import HttpError
from ..rendering import make_templates

ACCOUNTS = Accounts(site="shop", table="shop_customers", login_field="email", cookie="shop_session")
CART_COOKIE = "shop_cart"
SORTS = {
    "position": ("Position", "p.id"),
    "price_asc": ("Price: low to high", "p.price_cents, p.id"),
    "price_desc": ("Price: high to low", "p.price_cents DESC, p.id"),
    "name": ("Name", "p.name"),
    "rating": ("Rating", "avg_rating DESC, review_count DESC, p.id"),
}
ADDRESS_FIELDS = [
    ("street", "Street address"),
    ("city", "City"),
    ("state", "State"),
    ("zip", "ZIP code"),
    ("country", "Country"),
    ("phone", "Phone"),
]

# Products with their review aggregates, the shape every listing and product page renders.
PRODUCT_SELECT = """
SELECT p.*, COUNT(r.id) AS review_count, COALESCE(AVG(r.rating), 0) AS avg_rating
FROM shop_products p LEFT JOIN shop_reviews r ON r.product_id = p.id
"""


class _Blank(dict):
    """Form values for re-rendering a form: missing fields read as empty strings."""

    def __missing__(self, key: str) -> str:
        return ""

    def __getattr__(self, key: str) -> str:
        return self[key]


class ShopContext(AccountContext):
    """A shop request: the signed-in customer (``user``), the cart, and the shop's page layout."""

    flash_cookie = "shop_flash"
    accounts = ACCOUNTS
    templates = make_templates("shop", site_name=SHOP_NAME, sorts=[(k, v[0]) for k, v in SORTS.items()])
    blank_chrome = {"categories": [], "customer": None, "cart_count": 0, "current_category": None}

    def cart_key(self, create: bool = False) -> str | None:
        if self.user is not None:
            return f"customer:{self.user['id']}"
        guest = self.request.cookies.get(CART_COOKIE)
        if not guest and create:
            guest = secrets.token_urlsafe(18)
            self.set_cookie(CART_COOKIE, guest)
        return f"guest:{guest}" if guest else None

    def cart_count(self) -> int:
        key = self.cart_key()
        if key is None:
            return 0
        row = self.db.execute(
            "SELECT COALESCE(SUM(qty), 0) FROM shop_cart_items WHERE cart = ?", (key,)
        ).fetchone()
        return int(row[0])

    def sign_in(self, user_id: int) -> None:
        super().sign_in(user_id)
        guest = self.request.cookies.get(CART_COOKIE)
        if guest:
            # What a guest put in the cart follows them into their account.
            self.db.execute(
                "INSERT INTO shop_cart_items (cart, product_id, qty) "
                "SELECT ?, product_id, qty FROM shop_cart_items WHERE cart = ? "
                "ON CONFLICT (cart, product_id) DO UPDATE SET qty = qty + excluded.qty",
                (f"customer:{user_id}", f"guest:{guest}"),
            )
            self.db.execute("DELETE FROM shop_cart_items WHERE cart = ?", (f"guest:{guest}",))
            self.delete_cookie(CART_COOKIE)

    def page_defaults(self) -> dict[str, Any]:
        return {**super().page_defaults(), "current_category": None, "form": _Blank(self.form)}

    def chrome(self) -> dict[str, Any]:
        return {
            "categories": self.db.execute("SELECT * FROM shop_categories ORDER BY id").fetchall(),
            "customer": self.user,
            "cart_count": self.cart_count(),
        }


def int_or(value: str, default: int) -> int:
    try:
        return int(value)
    except ValueError:
        return default


def product_by_slug(ctx: ShopContext, slug: str) -> sqlite3.Row:
    row = ctx.db.execute(PRODUCT_SELECT + " WHERE p.slug = ? GROUP BY p.id", (slug,)).fetchone()
    if row is None:
        raise HttpError(404, "Page not found", "The product you are looking for does not exist.")
    return row


def product_by_id(ctx: ShopContext, value: str) -> sqlite3.Row:
    row = ctx.db.execute("SELECT * FROM shop_products WHERE id = ?", (int_or(value, 0),)).fetchone()
    if row is None:
        raise HttpError(404, "Page not found", "The product you are looking for does not exist.")
    return row


def cart_lines(ctx: ShopContext) -> list[sqlite3.Row]:
    key = ctx.cart_key()
    if key is None:
        return []
    return ctx.db.execute(
        "SELECT ci.product_id, ci.qty, p.name, p.slug, p.sku, p.price_cents, p.stock "
        "FROM shop_cart_items ci JOIN shop_products p ON p.id = ci.product_id "
        "WHERE ci.cart = ? ORDER BY p.name",
        (key,),
    ).fetchall()
