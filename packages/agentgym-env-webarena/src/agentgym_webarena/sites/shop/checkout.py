"""The shop's checkout: the shipping form, and the cart turned into a "Pending" order."""

from __future__ import annotations

import sqlite3

from starlette.responses import Response

from ..data.clock import SITE_NOW
from ..data.shop import SHIPPING_CENTS
from .context import ADDRESS_FIELDS, ShopContext, cart_lines


def _address_values(ctx: ShopContext, customer: sqlite3.Row) -> dict[str, str]:
    values = {"ship_name": customer["name"], **{name: customer[name] for name, _ in ADDRESS_FIELDS}}
    if ctx.request.method == "POST":
        values = {name: ctx.field(name) for name in values}
    return values


def checkout(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    lines = cart_lines(ctx)
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
