"""Generated content of the two embedded sites: a shop ("One Stop Market", ``shop``) and a forum
("Postmill", ``forum``).

Everything comes from each site's word lists (``shop_words``, ``forum_words``) and two seeded
``random.Random`` instances (one per site, so that editing the forum's lists never changes the
shop's data), with no network and no files read. The content is generated once per process
(``shop.shop_data()``, ``forum.forum_data()``) and is identical on every run and every machine, so
tasks can name products, prices, orders and posts. Both live in the frozen present of ``clock``.
"""
