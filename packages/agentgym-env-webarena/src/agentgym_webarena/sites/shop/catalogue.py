"""The shop's catalogue pages: home, categories, search, product pages and writing a review."""

from __future__ import annotations

import sqlite3
from urllib.parse import urlencode

from starlette.responses import Response

from ..data.clock import SITE_NOW
from ..errors import HttpError
from .context import PRODUCT_SELECT, SORTS, ShopContext, int_or, product_by_slug


def home(ctx: ShopContext) -> Response:
    products = ctx.db.execute(
        PRODUCT_SELECT + " GROUP BY p.id HAVING review_count >= 2 ORDER BY avg_rating DESC, p.id LIMIT 8"
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
        PRODUCT_SELECT + f" WHERE p.category_id = ? GROUP BY p.id ORDER BY {SORTS[sort][1]}", (cat["id"],)
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
            PRODUCT_SELECT + f" WHERE {clauses} GROUP BY p.id ORDER BY {order}", params
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
    return _product_page(ctx, product_by_slug(ctx, ctx.request.path_params["slug"]))


def add_review(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    p = product_by_slug(ctx, ctx.request.path_params["slug"])
    title, body, rating = ctx.field("title"), ctx.field("body"), int_or(ctx.field("rating"), 0)
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
