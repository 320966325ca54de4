"""One Stop Market: the embedded stand-in for WebArena's Magento shop (``create_shop_app``).

Server-rendered HTML, every function reachable without JavaScript (links, GET forms, POST forms that
answer 303). Routes:

    GET  /                          home: category nav, search, featured products
    GET  /category/<slug>           products of a category; ?sort=position|price_asc|price_desc|name|rating
    GET  /search?q=&sort=           products whose name, description or category has every word of q
    GET  /product/<slug>            product page: price, SKU, stock, rating, reviews, add-to-cart, review form
    POST /product/<slug>/review     write a review (signed in): title, rating (1-5), body
    POST /cart/add                  product_id, qty (default 1) -> back to where the form was, with a status
    GET  /cart                      the cart (the customer's when signed in, else the guest cookie's)
    POST /cart/update               qty_<product id> for every line (0 removes the line)
    POST /cart/remove               product_id
    GET  /checkout                  shipping form prefilled from the account (sign-in required)
    POST /checkout                  ship_name, street, city, state, zip, country, phone -> new "Pending" order
    GET  /account                   contact information and address (sign-in required)
    GET  /account/edit, POST        name, email, street, city, state, zip, country, phone,
                                    current_password + new_password (both optional, to change the password)
    GET  /account/orders            order history
    GET  /account/orders/<id>       one order (404 unless it is the customer's)
    GET  /account/wishlist          wish list
    POST /wishlist/add              product_id (sign-in required)
    POST /wishlist/remove           product_id
    GET  /login, POST /login        email, password, next
    GET  /register, POST /register  name, email, password
    GET  /logout (or POST)          sign out

A signed-in customer's cart is ``customer:<id>``; a guest's is ``guest:<random cookie>``, merged into
the customer's cart when they sign in. Orders placed here are dated ``SITE_NOW`` (the sites' frozen
clock) and get the next order number. Flash messages travel in a cookie and are shown once in a
role="status" element; form errors are shown in a role="alert" element.
"""

from __future__ import annotations

import secrets
import sqlite3
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.responses import Response

from .app import GET, GET_POST, POST, site_app
from .auth import AccountContext, Accounts, check_password, hash_password, login_handler, logout_handler
from .data.clock import SITE_NOW
from .data.shop import SHIPPING_CENTS, SHOP_NAME
from .db import Databases
from .errors import HttpError, Redirect
from .rendering import make_templates
from .urls import safe_next

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
_PRODUCT_SELECT = """
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


def _int(value: str, default: int) -> int:
    try:
        return int(value)
    except ValueError:
        return default


def _product_by_slug(ctx: ShopContext, slug: str) -> sqlite3.Row:
    row = ctx.db.execute(_PRODUCT_SELECT + " WHERE p.slug = ? GROUP BY p.id", (slug,)).fetchone()
    if row is None:
        raise HttpError(404, "Page not found", "The product you are looking for does not exist.")
    return row


def _product_by_id(ctx: ShopContext, value: str) -> sqlite3.Row:
    row = ctx.db.execute("SELECT * FROM shop_products WHERE id = ?", (_int(value, 0),)).fetchone()
    if row is None:
        raise HttpError(404, "Page not found", "The product you are looking for does not exist.")
    return row


def _cart_lines(ctx: ShopContext) -> list[sqlite3.Row]:
    key = ctx.cart_key()
    if key is None:
        return []
    return ctx.db.execute(
        "SELECT ci.product_id, ci.qty, p.name, p.slug, p.sku, p.price_cents, p.stock "
        "FROM shop_cart_items ci JOIN shop_products p ON p.id = ci.product_id "
        "WHERE ci.cart = ? ORDER BY p.name",
        (key,),
    ).fetchall()


# ------------------------------------------------------------------------------------------ catalogue


def home(ctx: ShopContext) -> Response:
    products = ctx.db.execute(
        _PRODUCT_SELECT + " GROUP BY p.id HAVING review_count >= 2 ORDER BY avg_rating DESC, p.id LIMIT 8"
    ).fetchall()
    return ctx.render("home.html", products=products, back="/")


def category(ctx: ShopContext) -> Response:
    slug = ctx.request.path_params["slug"]
    cat = ctx.db.execute("SELECT * FROM shop_categories WHERE slug = ?", (slug,)).fetchone()
    if cat is None:
        raise HttpError(404, "Page not found", "There is no such category.")
    sort = ctx.query("sort", "position")
    sort = sort if sort in SORTS else "position"
    products = ctx.db.execute(
        _PRODUCT_SELECT + f" WHERE p.category_id = ? GROUP BY p.id ORDER BY {SORTS[sort][1]}", (cat["id"],)
    ).fetchall()
    return ctx.render(
        "listing.html",
        page_title=cat["name"],
        heading=cat["name"],
        intro=cat["description"],
        products=products,
        sort=sort,
        sort_base=f"/category/{slug}?",
        current_category=slug,
        empty_message="There are no products in this category.",
        back=f"/category/{slug}?sort={sort}",
    )


def search(ctx: ShopContext) -> Response:
    query = ctx.query("q").strip()
    sort = ctx.query("sort", "position")
    sort = sort if sort in SORTS else "position"
    words = query.lower().split()
    products: list[sqlite3.Row] = []
    if words:
        # Every word must appear in the name, the description or the category's name.
        clauses = " AND ".join(
            "(lower(p.name) LIKE ? ESCAPE '\\' OR lower(p.description) LIKE ? ESCAPE '\\' OR "
            "p.category_id IN (SELECT id FROM shop_categories WHERE lower(name) LIKE ? ESCAPE '\\'))"
            for _ in words
        )
        params: list[str] = []
        for word in words:
            pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            params += [pattern, pattern, pattern]
        order = SORTS[sort][1]
        if sort == "position":
            # Relevance first: products with more of the words in their name.
            name_hits = " + ".join("(instr(lower(p.name), ?) > 0)" for _ in words)
            order = f"({name_hits}) DESC, p.id"
            params += words
        products = ctx.db.execute(
            _PRODUCT_SELECT + f" WHERE {clauses} GROUP BY p.id ORDER BY {order}", params
        ).fetchall()
    return ctx.render(
        "listing.html",
        page_title=f"Search results for: '{query}'",
        heading=f"Search results for: '{query}'",
        intro="",
        products=products,
        sort=sort,
        sort_base=f"/search?{urlencode({'q': query})}&",
        query=query,
        empty_message=f'No products match "{query}".' if query else "Enter a word to search for.",
        back=f"/search?{urlencode({'q': query, 'sort': sort})}",
    )


def _product_page(ctx: ShopContext, p: sqlite3.Row, status: int = 200, error: str | None = None) -> Response:
    cat = ctx.db.execute("SELECT * FROM shop_categories WHERE id = ?", (p["category_id"],)).fetchone()
    reviews = ctx.db.execute(
        "SELECT * FROM shop_reviews WHERE product_id = ? ORDER BY created DESC, id DESC", (p["id"],)
    ).fetchall()
    return ctx.render(
        "product.html",
        status,
        page_title=p["name"],
        p=p,
        category=cat,
        current_category=cat["slug"],
        reviews=reviews,
        login_link=ctx.login_link(f"/product/{p['slug']}"),
        error=error,
    )


def product(ctx: ShopContext) -> Response:
    return _product_page(ctx, _product_by_slug(ctx, ctx.request.path_params["slug"]))


def add_review(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    p = _product_by_slug(ctx, ctx.request.path_params["slug"])
    title, body, rating = ctx.field("title"), ctx.field("body"), _int(ctx.field("rating"), 0)
    if not title or not body or not 1 <= rating <= 5:
        return _product_page(
            ctx, p, 400, "Please give the review a title, a rating from 1 to 5 and some text."
        )
    ctx.db.execute(
        "INSERT INTO shop_reviews (product_id, customer_id, author, rating, title, body, created) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            p["id"],
            customer["id"],
            customer["name"],
            rating,
            title[:120],
            body[:4000],
            SITE_NOW.isoformat(" "),
        ),
    )
    return ctx.redirect(f"/product/{p['slug']}#reviews", "You submitted your review. Thank you!")


# ----------------------------------------------------------------------------------------------- cart


def cart_add(ctx: ShopContext) -> Response:
    p = _product_by_id(ctx, ctx.field("product_id"))
    qty = _int(ctx.field("qty", "1") or "1", 1)
    back = safe_next(ctx.field("back"), f"/product/{p['slug']}")
    if qty < 1:
        return ctx.redirect(back, "Please enter a quantity of 1 or more.")
    key = ctx.cart_key(create=True)
    row = ctx.db.execute(
        "SELECT qty FROM shop_cart_items WHERE cart = ? AND product_id = ?", (key, p["id"])
    ).fetchone()
    wanted = qty + (row["qty"] if row else 0)
    if wanted > p["stock"]:
        return ctx.redirect(back, f"Sorry, only {p['stock']} of {p['name']} are in stock.")
    ctx.db.execute(
        "INSERT INTO shop_cart_items (cart, product_id, qty) VALUES (?, ?, ?) "
        "ON CONFLICT (cart, product_id) DO UPDATE SET qty = excluded.qty",
        (key, p["id"], wanted),
    )
    return ctx.redirect(back, f"You added {qty} \u00d7 {p['name']} to your shopping cart.")


def cart_view(ctx: ShopContext) -> Response:
    lines = _cart_lines(ctx)
    subtotal = sum(line["price_cents"] * line["qty"] for line in lines)
    return ctx.render("cart.html", page_title="Shopping Cart", lines=lines, subtotal=subtotal)


def cart_update(ctx: ShopContext) -> Response:
    key = ctx.cart_key()
    problems = []
    for line in _cart_lines(ctx):
        raw = ctx.form.get(f"qty_{line['product_id']}")
        if raw is None:
            continue
        qty = _int(raw.strip(), line["qty"])
        if qty <= 0:
            ctx.db.execute(
                "DELETE FROM shop_cart_items WHERE cart = ? AND product_id = ?", (key, line["product_id"])
            )
        elif qty > line["stock"]:
            problems.append(f"only {line['stock']} of {line['name']} are in stock")
        else:
            ctx.db.execute(
                "UPDATE shop_cart_items SET qty = ? WHERE cart = ? AND product_id = ?",
                (qty, key, line["product_id"]),
            )
    if problems:
        return ctx.redirect("/cart", "Some quantities were not changed: " + "; ".join(problems) + ".")
    return ctx.redirect("/cart", "Your shopping cart was updated.")


def cart_remove(ctx: ShopContext) -> Response:
    key = ctx.cart_key()
    p = _product_by_id(ctx, ctx.field("product_id"))
    ctx.db.execute("DELETE FROM shop_cart_items WHERE cart = ? AND product_id = ?", (key, p["id"]))
    return ctx.redirect("/cart", f"You removed {p['name']} from your shopping cart.")


# ------------------------------------------------------------------------------------------- checkout


def _address_values(ctx: ShopContext, customer: sqlite3.Row) -> dict[str, str]:
    values = {"ship_name": customer["name"], **{name: customer[name] for name, _ in ADDRESS_FIELDS}}
    if ctx.request.method == "POST":
        values = {name: ctx.field(name) for name in values}
    return values


def checkout(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    lines = _cart_lines(ctx)
    if not lines:
        return ctx.redirect("/cart", "Your shopping cart is empty.")
    subtotal = sum(line["price_cents"] * line["qty"] for line in lines)
    address = _address_values(ctx, customer)

    def page(error: str | None = None) -> Response:
        return ctx.render(
            "checkout.html",
            200 if error is None else 400,
            page_title="Checkout",
            lines=lines,
            subtotal=subtotal,
            shipping=SHIPPING_CENTS,
            address=address,
            address_fields=ADDRESS_FIELDS,
            error=error,
        )

    if ctx.request.method == "GET":
        return page()
    missing = [label for name, label in [("ship_name", "Full name"), *ADDRESS_FIELDS] if not address[name]]
    if missing:
        return page("Please fill in: " + ", ".join(missing) + ".")
    short = [
        f"only {line['stock']} of {line['name']} are in stock"
        for line in lines
        if line["qty"] > line["stock"]
    ]
    if short:
        return page("We cannot place this order: " + "; ".join(short) + ".")
    order_id, number = _place_order(ctx, customer, lines, address)
    return ctx.redirect(
        f"/account/orders/{order_id}", f"Thank you for your order! Your order number is {number}."
    )


def _place_order(
    ctx: ShopContext, customer: sqlite3.Row, lines: list[sqlite3.Row], address: dict[str, str]
) -> tuple[int, str]:
    """Turn the cart into a "Pending" order with the next number, taking its items out of stock."""
    subtotal = sum(line["price_cents"] * line["qty"] for line in lines)
    last = ctx.db.execute("SELECT COALESCE(MAX(CAST(number AS INTEGER)), 100) FROM shop_orders").fetchone()[0]
    number = f"{last + 1:09d}"
    cursor = ctx.db.execute(
        "INSERT INTO shop_orders (number, customer_id, created, status, ship_name, ship_street, ship_city, "
        "ship_state, ship_zip, ship_country, ship_phone, subtotal_cents, shipping_cents, total_cents) "
        "VALUES (?, ?, ?, 'Pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            number,
            customer["id"],
            SITE_NOW.isoformat(" "),
            address["ship_name"],
            address["street"],
            address["city"],
            address["state"],
            address["zip"],
            address["country"],
            address["phone"],
            subtotal,
            SHIPPING_CENTS,
            subtotal + SHIPPING_CENTS,
        ),
    )
    order_id = int(cursor.lastrowid or 0)
    for line in lines:
        ctx.db.execute(
            "INSERT INTO shop_order_items (order_id, product_id, name, sku, price_cents, qty) VALUES (?, ?, ?, ?, ?, ?)",
            (order_id, line["product_id"], line["name"], line["sku"], line["price_cents"], line["qty"]),
        )
        ctx.db.execute(
            "UPDATE shop_products SET stock = stock - ? WHERE id = ?", (line["qty"], line["product_id"])
        )
    ctx.db.execute("DELETE FROM shop_cart_items WHERE cart = ?", (ctx.cart_key(),))
    return order_id, number


# -------------------------------------------------------------------------------------------- account


def account(ctx: ShopContext) -> Response:
    ctx.require_user()
    return ctx.render("account.html", page_title="My Account")


def account_edit(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    names = ["name", "email", *(name for name, _ in ADDRESS_FIELDS)]
    values = {name: customer[name] for name in names}
    if ctx.request.method == "GET":
        return ctx.render(
            "account_edit.html", page_title="Edit Account", values=values, address_fields=ADDRESS_FIELDS
        )
    values = {name: ctx.field(name) for name in names}

    def again(error: str) -> Response:
        return ctx.render(
            "account_edit.html",
            400,
            page_title="Edit Account",
            values=values,
            address_fields=ADDRESS_FIELDS,
            error=error,
        )

    missing = [name for name in names if not values[name]]
    if missing:
        return again("Please fill in every field.")
    if "@" not in values["email"]:
        return again("Please enter a valid email address.")
    taken = ctx.db.execute(
        "SELECT 1 FROM shop_customers WHERE email = ? AND id != ?", (values["email"], customer["id"])
    ).fetchone()
    if taken:
        return again("Another account already uses this email address.")
    current, new = ctx.form.get("current_password", ""), ctx.form.get("new_password", "")
    if new:
        if not check_password(current, customer["password_hash"]):
            return again("The current password is not correct.")
        if len(new) < 6:
            return again("The new password must have at least 6 characters.")
        ACCOUNTS.set_password(ctx.db, customer["id"], new)
    ctx.db.execute(
        f"UPDATE shop_customers SET {', '.join(f'{name} = ?' for name in names)} WHERE id = ?",
        [*values.values(), customer["id"]],
    )
    return ctx.redirect("/account", "You saved the account information.")


def orders(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    rows = ctx.db.execute(
        "SELECT * FROM shop_orders WHERE customer_id = ? ORDER BY created DESC, id DESC", (customer["id"],)
    ).fetchall()
    return ctx.render("orders.html", page_title="My Orders", orders=rows)


def order(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    order_id = _int(ctx.request.path_params["order_id"], 0)
    row = ctx.db.execute(
        "SELECT * FROM shop_orders WHERE id = ? AND customer_id = ?", (order_id, customer["id"])
    ).fetchone()
    if row is None:
        raise HttpError(404, "Order not found", "You have no order with this number.")
    items = ctx.db.execute(
        "SELECT i.*, p.slug FROM shop_order_items i LEFT JOIN shop_products p ON p.id = i.product_id "
        "WHERE i.order_id = ? ORDER BY i.id",
        (order_id,),
    ).fetchall()
    return ctx.render("order.html", page_title=f"Order # {row['number']}", order=row, items=items)


def wishlist(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    products = ctx.db.execute(
        "SELECT p.* FROM shop_wishlist w JOIN shop_products p ON p.id = w.product_id "
        "WHERE w.customer_id = ? ORDER BY w.added, p.id",
        (customer["id"],),
    ).fetchall()
    return ctx.render("wishlist.html", page_title="My Wish List", products=products)


def wishlist_add(ctx: ShopContext) -> Response:
    p = _product_by_id(ctx, ctx.field("product_id"))
    if ctx.user is None:
        raise Redirect(ctx.login_link(f"/product/{p['slug']}"))
    ctx.db.execute(
        "INSERT OR IGNORE INTO shop_wishlist (customer_id, product_id, added) VALUES (?, ?, ?)",
        (ctx.user["id"], p["id"], SITE_NOW.isoformat(" ")),
    )
    return ctx.redirect("/account/wishlist", f"{p['name']} has been added to your wish list.")


def wishlist_remove(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    p = _product_by_id(ctx, ctx.field("product_id"))
    ctx.db.execute(
        "DELETE FROM shop_wishlist WHERE customer_id = ? AND product_id = ?", (customer["id"], p["id"])
    )
    return ctx.redirect("/account/wishlist", f"{p['name']} has been removed from your wish list.")


# ---------------------------------------------------------------------------------------------- login


login = login_handler(
    title="Customer Login",
    default_next="/account",
    refused="The account sign-in was incorrect. Please check your email and password and try again.",
)
logout = logout_handler("You are signed out.")


def register(ctx: ShopContext) -> Response:
    if ctx.request.method == "GET":
        return ctx.render("register.html", page_title="Create New Customer Account")
    name, email, password = ctx.field("name"), ctx.field("email"), ctx.form.get("password", "")

    def again(error: str) -> Response:
        return ctx.render("register.html", 400, page_title="Create New Customer Account", error=error)

    if not name or "@" not in email or len(password) < 6:
        return again("Please enter your name, a valid email and a password of at least 6 characters.")
    if ctx.db.execute("SELECT 1 FROM shop_customers WHERE email = ?", (email,)).fetchone():
        return again("There is already an account with this email address.")
    cursor = ctx.db.execute(
        "INSERT INTO shop_customers (name, email, password_hash, street, city, state, zip, country, phone) "
        "VALUES (?, ?, ?, '', '', '', '', 'United States', '')",
        (name, email, hash_password(password)),
    )
    ctx.sign_in(int(cursor.lastrowid or 0))
    return ctx.redirect("/account", f"Thank you for registering with {SHOP_NAME}.")


ROUTES = [
    ("/", home, GET),
    ("/category/{slug}", category, GET),
    ("/search", search, GET),
    ("/product/{slug}", product, GET),
    ("/product/{slug}/review", add_review, POST),
    ("/cart", cart_view, GET),
    ("/cart/add", cart_add, POST),
    ("/cart/update", cart_update, POST),
    ("/cart/remove", cart_remove, POST),
    ("/checkout", checkout, GET_POST),
    ("/account", account, GET),
    ("/account/edit", account_edit, GET_POST),
    ("/account/orders", orders, GET),
    ("/account/orders/{order_id:int}", order, GET),
    ("/account/wishlist", wishlist, GET),
    ("/wishlist/add", wishlist_add, POST),
    ("/wishlist/remove", wishlist_remove, POST),
    ("/login", login, GET_POST),
    ("/register", register, GET_POST),
    ("/logout", logout, GET_POST),
]


def create_shop_app(dbs: Databases) -> Starlette:
    """The shop as a Starlette app over ``dbs`` (one database per ``X-AgentGym-Session`` token)."""
    return site_app(dbs, ShopContext, ROUTES)
