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
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .common import (
    Context,
    HttpError,
    Redirect,
    endpoint,
    here,
    html,
    login_url,
    make_templates,
    referer_path,
    safe_next,
    start_session,
)
from .data import SHIPPING_CENTS, SHOP_NAME, SITE_NOW
from .db import Databases, check_password, hash_password

SESSION_COOKIE = "shop_session"
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

_CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header.top{display:flex;flex-wrap:wrap;gap:1rem;align-items:center;padding:.75rem 1.5rem;background:#1f3a5f;color:#fff}
header.top a{color:#fff}.brand{font-size:1.4rem;font-weight:bold;text-decoration:none}
header.top ul,nav.cats ul{list-style:none;display:flex;gap:1rem;margin:0;padding:0}
nav.cats{background:#e9eef5;padding:.5rem 1.5rem}main{padding:1rem 1.5rem;max-width:70rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:1rem}
article.product,article.review{background:#fff;border:1px solid #ddd;padding:.75rem;border-radius:4px}
.price{font-weight:bold;font-size:1.1rem}[role=status]{background:#e5f6e5;padding:.5rem}
[role=alert]{background:#fde8e8;padding:.5rem}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}
label{display:block;margin-top:.5rem}.vh{position:absolute;width:1px;height:1px;overflow:hidden;
clip:rect(0 0 0 0);white-space:nowrap}button,.button{margin-top:.5rem}
"""

TEMPLATES = {
    "layout.html": """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% if page_title %}{{ page_title }} | {% endif %}{{ site_name }}</title>
<style>{{ css }}</style>
</head>
<body>
<header class="top">
  <a class="brand" href="/">{{ site_name }}</a>
  <form role="search" action="/search" method="get">
    <label for="search-q" class="vh">Search</label>
    <input id="search-q" type="search" name="q" value="{{ query }}" placeholder="Search entire store here...">
    <button type="submit">Search</button>
  </form>
  <nav aria-label="Account">
    <ul>
    {% if customer %}
      <li>Welcome, {{ customer.name }}!</li>
      <li><a href="/account">My Account</a></li>
      <li><a href="/account/wishlist">My Wish List</a></li>
      <li><a href="/logout">Sign out</a></li>
    {% else %}
      <li><a href="/login">Sign in</a></li>
      <li><a href="/register">Create an account</a></li>
    {% endif %}
      <li><a href="/cart">My Cart ({{ cart_count }} {{ "item" if cart_count == 1 else "items" }})</a></li>
    </ul>
  </nav>
</header>
<nav aria-label="Categories" class="cats">
  <ul>
  {% for c in categories %}
    <li><a href="/category/{{ c.slug }}"{% if c.slug == current_category %} aria-current="page"{% endif %}>{{ c.name }}</a></li>
  {% endfor %}
  </ul>
</nav>
<main>
{% if flash %}<p role="status">{{ flash }}</p>{% endif %}
{% if error %}<p role="alert">{{ error }}</p>{% endif %}
{% block content %}{% endblock %}
</main>
<footer><p>&copy; 2023 {{ site_name }}. A demonstration store: nothing is shipped or charged.</p></footer>
</body>
</html>
""",
    "macros.html": """{% macro rating_text(p) -%}
{% if p.review_count %}Rating: {{ "%.1f"|format(p.avg_rating) }} out of 5 ({{ p.review_count }} {{ "review" if p.review_count == 1 else "reviews" }}){% else %}No reviews yet{% endif %}
{%- endmacro %}
{% macro card(p, level=2) %}
<article class="product">
  <h{{ level }}><a href="/product/{{ p.slug }}">{{ p.name }}</a></h{{ level }}>
  <p class="price">{{ p.price_cents|money }}</p>
  <p>{{ rating_text(p) }}</p>
  {% if p.stock > 0 %}
  <form method="post" action="/cart/add">
    <input type="hidden" name="product_id" value="{{ p.id }}">
    <input type="hidden" name="back" value="{{ back }}">
    <button type="submit" aria-label="Add {{ p.name }} to cart">Add to cart</button>
  </form>
  {% else %}
  <p>Out of stock</p>
  {% endif %}
</article>
{% endmacro %}
{% macro sort_links(base, current) %}
<p>Sort by:
{% for key, label in sorts %}
  {% if key == current %}<strong aria-current="true">{{ label }}</strong>{% else %}<a href="{{ base }}sort={{ key }}">{{ label }}</a>{% endif %}{{ " |" if not loop.last }}
{% endfor %}
</p>
{% endmacro %}
""",
    "home.html": """{% extends "layout.html" %}
{% from "macros.html" import card with context %}
{% block content %}
<h1>Welcome to {{ site_name }}</h1>
<p>Everything you need, in one place. Browse a category or search the store.</p>
<section aria-labelledby="cats-h">
  <h2 id="cats-h">Shop by category</h2>
  <ul>
  {% for c in categories %}
    <li><a href="/category/{{ c.slug }}">{{ c.name }}</a>: {{ c.description }}</li>
  {% endfor %}
  </ul>
</section>
<section aria-labelledby="featured-h">
  <h2 id="featured-h">Featured products</h2>
  <div class="grid">
  {% for p in products %}{{ card(p, 3) }}{% endfor %}
  </div>
</section>
{% endblock %}
""",
    "listing.html": """{% extends "layout.html" %}
{% from "macros.html" import card, sort_links with context %}
{% block content %}
<h1>{{ heading }}</h1>
{% if intro %}<p>{{ intro }}</p>{% endif %}
{% if products %}
<p>{{ products|length }} {{ "item" if products|length == 1 else "items" }}</p>
{{ sort_links(sort_base, sort) }}
<div class="grid">
{% for p in products %}{{ card(p) }}{% endfor %}
</div>
{% else %}
<p>{{ empty_message }}</p>
{% endif %}
{% endblock %}
""",
    "product.html": """{% extends "layout.html" %}
{% from "macros.html" import rating_text %}
{% block content %}
<p><a href="/">Home</a> &rsaquo; <a href="/category/{{ category.slug }}">{{ category.name }}</a></p>
<h1>{{ p.name }}</h1>
<p class="price">{{ p.price_cents|money }}</p>
<p>SKU: {{ p.sku }}</p>
<p>{% if p.stock > 0 %}In stock ({{ p.stock }} available){% else %}Out of stock{% endif %}</p>
<p>{{ rating_text(p) }}{% if p.review_count %} <a href="#reviews">Read reviews</a>{% endif %}</p>
{% if p.stock > 0 %}
<form method="post" action="/cart/add">
  <input type="hidden" name="product_id" value="{{ p.id }}">
  <input type="hidden" name="back" value="/product/{{ p.slug }}">
  <label for="qty">Qty</label>
  <input id="qty" name="qty" type="number" min="1" max="{{ p.stock }}" value="1">
  <button type="submit">Add to cart</button>
</form>
{% endif %}
<form method="post" action="/wishlist/add">
  <input type="hidden" name="product_id" value="{{ p.id }}">
  <button type="submit">Add to wish list</button>
</form>
<section aria-labelledby="details-h">
  <h2 id="details-h">Details</h2>
  <p>{{ p.description }}</p>
</section>
<section aria-labelledby="reviews">
  <h2 id="reviews">Customer reviews ({{ p.review_count }})</h2>
  {% for r in reviews %}
  <article class="review">
    <h3>{{ r.title }}</h3>
    <p>Rating: {{ r.rating }} out of 5 stars</p>
    <p>Review by {{ r.author }}, posted {{ r.created|long_date }}</p>
    <p>{{ r.body }}</p>
  </article>
  {% else %}
  <p>This product has no reviews yet.</p>
  {% endfor %}
</section>
<section aria-labelledby="write-h">
  <h2 id="write-h">Write a review</h2>
  {% if customer %}
  <form method="post" action="/product/{{ p.slug }}/review">
    <label for="review-title">Title</label>
    <input id="review-title" name="title" required maxlength="120" value="{{ form.title }}">
    <label for="review-rating">Rating</label>
    <select id="review-rating" name="rating">
    {% for n in [5, 4, 3, 2, 1] %}
      <option value="{{ n }}"{% if form.rating == n|string %} selected{% endif %}>{{ n }} {{ "star" if n == 1 else "stars" }}</option>
    {% endfor %}
    </select>
    <label for="review-body">Review</label>
    <textarea id="review-body" name="body" rows="4" required>{{ form.body }}</textarea>
    <button type="submit">Submit review</button>
  </form>
  {% else %}
  <p><a href="{{ login_link }}">Sign in to write a review</a></p>
  {% endif %}
</section>
{% endblock %}
""",
    "cart.html": """{% extends "layout.html" %}
{% block content %}
<h1>Shopping Cart</h1>
{% if lines %}
<table>
  <thead><tr><th scope="col">Item</th><th scope="col">Price</th><th scope="col">Qty</th><th scope="col">Subtotal</th><th scope="col">Action</th></tr></thead>
  <tbody>
  {% for line in lines %}
    <tr>
      <td><a href="/product/{{ line.slug }}">{{ line.name }}</a></td>
      <td>{{ line.price_cents|money }}</td>
      <td><label for="qty-{{ line.product_id }}">Qty<span class="vh"> for {{ line.name }}</span></label>
        <input id="qty-{{ line.product_id }}" form="cart-form" name="qty_{{ line.product_id }}" type="number" min="0" value="{{ line.qty }}"></td>
      <td>{{ (line.price_cents * line.qty)|money }}</td>
      <td><button type="submit" form="remove-{{ line.product_id }}">Remove<span class="vh"> {{ line.name }}</span></button></td>
    </tr>
  {% endfor %}
  </tbody>
</table>
<form id="cart-form" method="post" action="/cart/update"><button type="submit">Update cart</button></form>
{% for line in lines %}
<form id="remove-{{ line.product_id }}" method="post" action="/cart/remove"><input type="hidden" name="product_id" value="{{ line.product_id }}"></form>
{% endfor %}
<p>Subtotal: {{ subtotal|money }}</p>
<p><a href="/checkout">Proceed to checkout</a></p>
{% else %}
<p>You have no items in your shopping cart.</p>
<p><a href="/">Continue shopping</a></p>
{% endif %}
{% endblock %}
""",
    "checkout.html": """{% extends "layout.html" %}
{% block content %}
<h1>Checkout</h1>
<section aria-labelledby="summary-h">
  <h2 id="summary-h">Order summary</h2>
  <table>
    <thead><tr><th scope="col">Item</th><th scope="col">Price</th><th scope="col">Qty</th><th scope="col">Subtotal</th></tr></thead>
    <tbody>
    {% for line in lines %}
      <tr><td>{{ line.name }}</td><td>{{ line.price_cents|money }}</td><td>{{ line.qty }}</td><td>{{ (line.price_cents * line.qty)|money }}</td></tr>
    {% endfor %}
    </tbody>
  </table>
  <p>Subtotal: {{ subtotal|money }}</p>
  <p>Shipping (flat rate): {{ shipping|money }}</p>
  <p>Order total: {{ (subtotal + shipping)|money }}</p>
</section>
<form method="post" action="/checkout">
  <fieldset>
    <legend>Shipping address</legend>
    <label for="ship-name">Full name</label>
    <input id="ship-name" name="ship_name" required value="{{ address.ship_name }}">
    {% for name, label in address_fields %}
    <label for="ship-{{ name }}">{{ label }}</label>
    <input id="ship-{{ name }}" name="{{ name }}" required value="{{ address[name] }}">
    {% endfor %}
  </fieldset>
  <p>Payment method: Check / Money order</p>
  <button type="submit">Place order</button>
</form>
{% endblock %}
""",
    "login.html": """{% extends "layout.html" %}
{% block content %}
<h1>Customer Login</h1>
<form method="post" action="/login">
  <input type="hidden" name="next" value="{{ next }}">
  <label for="login-email">Email</label>
  <input id="login-email" name="email" type="email" autocomplete="username" required value="{{ email }}">
  <label for="login-password">Password</label>
  <input id="login-password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>
<p>New customer? <a href="/register">Create an account</a></p>
{% endblock %}
""",
    "register.html": """{% extends "layout.html" %}
{% block content %}
<h1>Create New Customer Account</h1>
<form method="post" action="/register">
  <label for="reg-name">Full name</label>
  <input id="reg-name" name="name" required value="{{ form.name }}">
  <label for="reg-email">Email</label>
  <input id="reg-email" name="email" type="email" required value="{{ form.email }}">
  <label for="reg-password">Password</label>
  <input id="reg-password" name="password" type="password" required minlength="6">
  <button type="submit">Create an account</button>
</form>
{% endblock %}
""",
    "account.html": """{% extends "layout.html" %}
{% block content %}
<h1>My Account</h1>
<section aria-labelledby="contact-h">
  <h2 id="contact-h">Contact information</h2>
  <p>{{ customer.name }}</p>
  <p>{{ customer.email }}</p>
</section>
<section aria-labelledby="address-h">
  <h2 id="address-h">Default shipping address</h2>
  <address>{{ customer.name }}<br>{{ customer.street }}<br>{{ customer.city }}, {{ customer.state }} {{ customer.zip }}<br>{{ customer.country }}<br>Phone: {{ customer.phone }}</address>
</section>
<ul>
  <li><a href="/account/edit">Edit account</a></li>
  <li><a href="/account/orders">My Orders</a></li>
  <li><a href="/account/wishlist">My Wish List</a></li>
</ul>
{% endblock %}
""",
    "account_edit.html": """{% extends "layout.html" %}
{% block content %}
<h1>Edit Account Information</h1>
<form method="post" action="/account/edit">
  <label for="acct-name">Full name</label>
  <input id="acct-name" name="name" required value="{{ values.name }}">
  <label for="acct-email">Email</label>
  <input id="acct-email" name="email" type="email" required value="{{ values.email }}">
  {% for name, label in address_fields %}
  <label for="acct-{{ name }}">{{ label }}</label>
  <input id="acct-{{ name }}" name="{{ name }}" required value="{{ values[name] }}">
  {% endfor %}
  <fieldset>
    <legend>Change password (optional)</legend>
    <label for="acct-current">Current password</label>
    <input id="acct-current" name="current_password" type="password">
    <label for="acct-new">New password</label>
    <input id="acct-new" name="new_password" type="password">
  </fieldset>
  <button type="submit">Save</button>
</form>
{% endblock %}
""",
    "orders.html": """{% extends "layout.html" %}
{% block content %}
<h1>My Orders</h1>
{% if orders %}
<table>
  <thead><tr><th scope="col">Order #</th><th scope="col">Date</th><th scope="col">Ship to</th><th scope="col">Order total</th><th scope="col">Status</th><th scope="col">Action</th></tr></thead>
  <tbody>
  {% for o in orders %}
    <tr><td>{{ o.number }}</td><td>{{ o.created|long_date }}</td><td>{{ o.ship_name }}</td><td>{{ o.total_cents|money }}</td><td>{{ o.status }}</td>
      <td><a href="/account/orders/{{ o.id }}">View order<span class="vh"> {{ o.number }}</span></a></td></tr>
  {% endfor %}
  </tbody>
</table>
{% else %}
<p>You have placed no orders.</p>
{% endif %}
{% endblock %}
""",
    "order.html": """{% extends "layout.html" %}
{% block content %}
<h1>Order # {{ order.number }}</h1>
<p>Status: {{ order.status }}</p>
<p>Order date: {{ order.created|long_date }}</p>
<table>
  <thead><tr><th scope="col">Product name</th><th scope="col">SKU</th><th scope="col">Price</th><th scope="col">Qty</th><th scope="col">Subtotal</th></tr></thead>
  <tbody>
  {% for i in items %}
    <tr><td>{% if i.slug %}<a href="/product/{{ i.slug }}">{{ i.name }}</a>{% else %}{{ i.name }}{% endif %}</td><td>{{ i.sku }}</td><td>{{ i.price_cents|money }}</td><td>{{ i.qty }}</td><td>{{ (i.price_cents * i.qty)|money }}</td></tr>
  {% endfor %}
  </tbody>
</table>
<p>Subtotal: {{ order.subtotal_cents|money }}</p>
<p>Shipping &amp; handling: {{ order.shipping_cents|money }}</p>
<p>Grand total: {{ order.total_cents|money }}</p>
<section aria-labelledby="ship-h">
  <h2 id="ship-h">Shipping address</h2>
  <address>{{ order.ship_name }}<br>{{ order.ship_street }}<br>{{ order.ship_city }}, {{ order.ship_state }} {{ order.ship_zip }}<br>{{ order.ship_country }}<br>Phone: {{ order.ship_phone }}</address>
</section>
<p>Payment method: Check / Money order</p>
<p><a href="/account/orders">Back to My Orders</a></p>
{% endblock %}
""",
    "wishlist.html": """{% extends "layout.html" %}
{% block content %}
<h1>My Wish List</h1>
{% if products %}
<ul>
{% for p in products %}
  <li><a href="/product/{{ p.slug }}">{{ p.name }}</a> {{ p.price_cents|money }}
    <form method="post" action="/wishlist/remove"><input type="hidden" name="product_id" value="{{ p.id }}"><button type="submit">Remove<span class="vh"> {{ p.name }}</span></button></form>
  </li>
{% endfor %}
</ul>
{% else %}
<p>You have no items in your wish list.</p>
{% endif %}
{% endblock %}
""",
    "error.html": """{% extends "layout.html" %}
{% block content %}
<h1>{{ heading }}</h1>
<p>{{ message }}</p>
<p><a href="/">Go to the home page</a></p>
{% endblock %}
""",
}

_env = make_templates(TEMPLATES, site_name=SHOP_NAME, css=_CSS, sorts=[(k, v[0]) for k, v in SORTS.items()])

# Products with their review aggregates, the shape every listing and product page renders.
_PRODUCT_SELECT = """
SELECT p.*, COUNT(r.id) AS review_count, COALESCE(AVG(r.rating), 0) AS avg_rating
FROM shop_products p LEFT JOIN shop_reviews r ON r.product_id = p.id
"""


class ShopContext(Context):
    flash_cookie = "shop_flash"

    def __init__(self, request: Request, db: sqlite3.Connection, form: dict[str, str]) -> None:
        super().__init__(request, db, form)
        self.customer: sqlite3.Row | None = None
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            self.customer = db.execute(
                "SELECT c.* FROM sessions s JOIN shop_customers c ON c.id = s.user_id "
                "WHERE s.token = ? AND s.site = 'shop'",
                (token,),
            ).fetchone()

    def require_customer(self) -> sqlite3.Row:
        if self.customer is None:
            target = here(self.request)
            if self.request.method == "POST":
                # After signing in, go back to the page the form was on rather than to a POST-only URL.
                target = safe_next(self.form.get("back"), referer_path(self.request, "/"))
            raise Redirect(login_url("/login", target))
        return self.customer

    def cart_key(self, create: bool = False) -> str | None:
        if self.customer is not None:
            return f"customer:{self.customer['id']}"
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

    def render(self, template: str, status: int = 200, **values: Any) -> Response:
        values.setdefault("page_title", "")
        values.setdefault("error", None)
        values.setdefault("current_category", None)
        values.setdefault("query", "")
        values.setdefault("form", _Blank(self.form))
        page = _env.get_template(template).render(
            categories=self.db.execute("SELECT * FROM shop_categories ORDER BY id").fetchall(),
            customer=self.customer,
            cart_count=self.cart_count(),
            flash=self.flash,
            **values,
        )
        return html(page, status)


class _Blank(dict):
    """Form values for re-rendering a form: missing fields read as empty strings."""

    def __missing__(self, key: str) -> str:
        return ""

    def __getattr__(self, key: str) -> str:
        return self[key]


def _render_error(ctx: Context | None, error: HttpError) -> Response:
    if isinstance(ctx, ShopContext):
        return ctx.render(
            "error.html", error.status, page_title=error.title, heading=error.title, message=error.message
        )
    page = _env.get_template("error.html").render(
        page_title=error.title,
        heading=error.title,
        message=error.message,
        categories=[],
        customer=None,
        cart_count=0,
        flash=None,
        error=None,
        current_category=None,
        query="",
    )
    return html(page, error.status)


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
        login_link=login_url("/login", f"/product/{p['slug']}"),
        error=error,
    )


def product(ctx: ShopContext) -> Response:
    return _product_page(ctx, _product_by_slug(ctx, ctx.request.path_params["slug"]))


def add_review(ctx: ShopContext) -> Response:
    customer = ctx.require_customer()
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
    customer = ctx.require_customer()
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
    order_id = cursor.lastrowid
    for line in lines:
        ctx.db.execute(
            "INSERT INTO shop_order_items (order_id, product_id, name, sku, price_cents, qty) VALUES (?, ?, ?, ?, ?, ?)",
            (order_id, line["product_id"], line["name"], line["sku"], line["price_cents"], line["qty"]),
        )
        ctx.db.execute(
            "UPDATE shop_products SET stock = stock - ? WHERE id = ?", (line["qty"], line["product_id"])
        )
    ctx.db.execute("DELETE FROM shop_cart_items WHERE cart = ?", (ctx.cart_key(),))
    return ctx.redirect(
        f"/account/orders/{order_id}", f"Thank you for your order! Your order number is {number}."
    )


# -------------------------------------------------------------------------------------------- account


def account(ctx: ShopContext) -> Response:
    ctx.require_customer()
    return ctx.render("account.html", page_title="My Account")


def account_edit(ctx: ShopContext) -> Response:
    customer = ctx.require_customer()
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
        ctx.db.execute(
            "UPDATE shop_customers SET password_hash = ? WHERE id = ?", (hash_password(new), customer["id"])
        )
    ctx.db.execute(
        f"UPDATE shop_customers SET {', '.join(f'{name} = ?' for name in names)} WHERE id = ?",
        [*values.values(), customer["id"]],
    )
    return ctx.redirect("/account", "You saved the account information.")


def orders(ctx: ShopContext) -> Response:
    customer = ctx.require_customer()
    rows = ctx.db.execute(
        "SELECT * FROM shop_orders WHERE customer_id = ? ORDER BY created DESC, id DESC", (customer["id"],)
    ).fetchall()
    return ctx.render("orders.html", page_title="My Orders", orders=rows)


def order(ctx: ShopContext) -> Response:
    customer = ctx.require_customer()
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
    customer = ctx.require_customer()
    products = ctx.db.execute(
        "SELECT p.* FROM shop_wishlist w JOIN shop_products p ON p.id = w.product_id "
        "WHERE w.customer_id = ? ORDER BY w.added, p.id",
        (customer["id"],),
    ).fetchall()
    return ctx.render("wishlist.html", page_title="My Wish List", products=products)


def wishlist_add(ctx: ShopContext) -> Response:
    p = _product_by_id(ctx, ctx.field("product_id"))
    if ctx.customer is None:
        raise Redirect(login_url("/login", f"/product/{p['slug']}"))
    ctx.db.execute(
        "INSERT OR IGNORE INTO shop_wishlist (customer_id, product_id, added) VALUES (?, ?, ?)",
        (ctx.customer["id"], p["id"], SITE_NOW.isoformat(" ")),
    )
    return ctx.redirect("/account/wishlist", f"{p['name']} has been added to your wish list.")


def wishlist_remove(ctx: ShopContext) -> Response:
    customer = ctx.require_customer()
    p = _product_by_id(ctx, ctx.field("product_id"))
    ctx.db.execute(
        "DELETE FROM shop_wishlist WHERE customer_id = ? AND product_id = ?", (customer["id"], p["id"])
    )
    return ctx.redirect("/account/wishlist", f"{p['name']} has been removed from your wish list.")


# ---------------------------------------------------------------------------------------------- login


def _sign_in(ctx: ShopContext, customer_id: int) -> None:
    start_session(ctx, "shop", customer_id, SESSION_COOKIE)
    guest = ctx.request.cookies.get(CART_COOKIE)
    if guest:
        # What a guest put in the cart follows them into their account.
        ctx.db.execute(
            "INSERT INTO shop_cart_items (cart, product_id, qty) "
            "SELECT ?, product_id, qty FROM shop_cart_items WHERE cart = ? "
            "ON CONFLICT (cart, product_id) DO UPDATE SET qty = qty + excluded.qty",
            (f"customer:{customer_id}", f"guest:{guest}"),
        )
        ctx.db.execute("DELETE FROM shop_cart_items WHERE cart = ?", (f"guest:{guest}",))
        ctx.delete_cookie(CART_COOKIE)


def login(ctx: ShopContext) -> Response:
    next_url = safe_next(ctx.form.get("next") or ctx.query("next"), "/account")
    if ctx.request.method == "GET":
        if ctx.customer is not None:
            return ctx.redirect(next_url)
        return ctx.render("login.html", page_title="Customer Login", next=next_url, email="")
    email = ctx.field("email")
    row = ctx.db.execute("SELECT * FROM shop_customers WHERE email = ?", (email,)).fetchone()
    if row is None or not check_password(ctx.form.get("password", ""), row["password_hash"]):
        return ctx.render(
            "login.html",
            401,
            page_title="Customer Login",
            next=next_url,
            email=email,
            error="The account sign-in was incorrect. Please check your email and password and try again.",
        )
    _sign_in(ctx, row["id"])
    return ctx.redirect(next_url)


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
    _sign_in(ctx, int(cursor.lastrowid or 0))
    return ctx.redirect("/account", f"Thank you for registering with {SHOP_NAME}.")


def logout(ctx: ShopContext) -> Response:
    token = ctx.request.cookies.get(SESSION_COOKIE)
    if token:
        ctx.db.execute("DELETE FROM sessions WHERE token = ? AND site = 'shop'", (token,))
    ctx.delete_cookie(SESSION_COOKIE)
    return ctx.redirect("/", "You are signed out.")


def create_shop_app(dbs: Databases) -> Starlette:
    """The shop as a Starlette app over ``dbs`` (one database per ``X-AgentGym-Session`` token)."""

    def route(path: str, handler: Any, methods: list[str] | None = None) -> Route:
        return Route(path, endpoint(dbs, ShopContext, handler, _render_error), methods=methods or ["GET"])

    routes = [
        route("/", home),
        route("/category/{slug}", category),
        route("/search", search),
        route("/product/{slug}", product),
        route("/product/{slug}/review", add_review, ["POST"]),
        route("/cart", cart_view),
        route("/cart/add", cart_add, ["POST"]),
        route("/cart/update", cart_update, ["POST"]),
        route("/cart/remove", cart_remove, ["POST"]),
        route("/checkout", checkout, ["GET", "POST"]),
        route("/account", account),
        route("/account/edit", account_edit, ["GET", "POST"]),
        route("/account/orders", orders),
        route("/account/orders/{order_id:int}", order),
        route("/account/wishlist", wishlist),
        route("/wishlist/add", wishlist_add, ["POST"]),
        route("/wishlist/remove", wishlist_remove, ["POST"]),
        route("/login", login, ["GET", "POST"]),
        route("/register", register, ["GET", "POST"]),
        route("/logout", logout, ["GET", "POST"]),
        # Last: any other URL gets a 404 page with the full layout, so the visitor can navigate on.
        Route("/{path:path}", endpoint(dbs, ShopContext, not_found, _render_error)),
    ]
    return Starlette(routes=routes)


def not_found(ctx: ShopContext) -> Response:
    raise HttpError(404, "Page not found", "The page you requested was not found.")
