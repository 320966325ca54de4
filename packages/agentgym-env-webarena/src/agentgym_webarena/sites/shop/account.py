"""The shop's account pages: contact details, order history, the wish list, login, logout and
registration.
"""

from __future__ import annotations

from starlette.responses import Response

from ..auth import check_password, hash_password, login_handler, logout_handler
from ..data.clock import SITE_NOW
from ..data.shop import SHOP_NAME
from ..errors import HttpError, Redirect
from .context import ACCOUNTS, ADDRESS_FIELDS, ShopContext, int_or, product_by_id


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
    order_id = int_or(ctx.request.path_params["order_id"], 0)
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
    p = product_by_id(ctx, ctx.field("product_id"))
    if ctx.user is None:
        raise Redirect(ctx.login_link(f"/product/{p['slug']}"))
    ctx.db.execute(
        "INSERT OR IGNORE INTO shop_wishlist (customer_id, product_id, added) VALUES (?, ?, ?)",
        (ctx.user["id"], p["id"], SITE_NOW.isoformat(" ")),
    )
    return ctx.redirect("/account/wishlist", f"{p['name']} has been added to your wish list.")


def wishlist_remove(ctx: ShopContext) -> Response:
    customer = ctx.require_user()
    p = product_by_id(ctx, ctx.field("product_id"))
    ctx.db.execute(
        "DELETE FROM shop_wishlist WHERE customer_id = ? AND product_id = ?", (customer["id"], p["id"])
    )
    return ctx.redirect("/account/wishlist", f"{p['name']} has been removed from your wish list.")


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
