"""The shop's cart: adding, viewing, changing and removing lines (a guest's cart or a customer's)."""

from __future__ import annotations

from starlette.responses import Response

from ..urls import safe_next
from .context import ShopContext, cart_lines, int_or, product_by_id


def cart_add(ctx: ShopContext) -> Response:
    p = product_by_id(ctx, ctx.field("product_id"))
    qty = int_or(ctx.field("qty", "1") or "1", 1)
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
    lines = cart_lines(ctx)
    subtotal = sum(line["price_cents"] * line["qty"] for line in lines)
    return ctx.render("cart.html", page_title="Shopping Cart", lines=lines, subtotal=subtotal)


def cart_update(ctx: ShopContext) -> Response:
    key = ctx.cart_key()
    problems = []
    for line in cart_lines(ctx):
        raw = ctx.form.get(f"qty_{line['product_id']}")
        if raw is None:
            continue
        qty = int_or(raw.strip(), line["qty"])
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
    p = product_by_id(ctx, ctx.field("product_id"))
    ctx.db.execute("DELETE FROM shop_cart_items WHERE cart = ? AND product_id = ?", (key, p["id"]))
    return ctx.redirect("/cart", f"You removed {p['name']} from your shopping cart.")
