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

The handlers live by area (``catalogue``, ``cart``, ``checkout``, ``account``) over the request
type in ``context``; this module puts them on their routes.
"""

from __future__ import annotations

from starlette.applications import Starlette

from ..app import GET, GET_POST, POST, site_app
from ..db import Databases
from .account import (
    account,
    account_edit,
    login,
    logout,
    order,
    orders,
    register,
    wishlist,
    wishlist_add,
    wishlist_remove,
)
from .cart import cart_add, cart_remove, cart_update, cart_view
from .catalogue import add_review, category, home, product, search
from .checkout import checkout
from .context import ShopContext

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
