"""The shop's word lists: its categories and their items, brands and models, book titles and
authors, product blurbs, reviewers and what they write, and its customers' addresses.

Only ``data.shop`` draws from them; reordering or editing an entry changes the generated shop.
"""

from __future__ import annotations

# (slug, name, description, SKU prefix, brands, [(item, lowest dollars, highest dollars, feature)])
CATEGORIES: list[tuple[str, str, str, str, list[str], list[tuple[str, int, int, str]]]] = [
    (
        "electronics",
        "Electronics",
        "Headphones, speakers, wearables and the gadgets that keep them charged.",
        "ELE",
        ["Voltix", "Sonara", "Kestrel", "Lumina", "Arcwave"],
        [
            ("Wireless Earbuds", 29, 149, "delivers up to 8 hours of playback from a single charge"),
            ("Bluetooth Speaker", 19, 129, "fills a room with clear sound and survives a splash"),
            ("Smart Watch", 79, 299, "tracks steps, sleep and heart rate and shows your notifications"),
            ("Noise Cancelling Headphones", 89, 349, "blocks engine hum and office chatter alike"),
            ("Portable Power Bank", 15, 69, "stores 20,000 mAh and charges two devices at once"),
            ("Action Camera", 99, 399, "records stabilized 4K video and is waterproof to 10 meters"),
            ("Mechanical Keyboard", 49, 179, "uses tactile switches and has a detachable USB-C cable"),
            ("Wireless Mouse", 12, 79, "tracks on almost any surface and runs for months on one battery"),
        ],
    ),
    (
        "home-kitchen",
        "Home & Kitchen",
        "Cookware, tableware and everyday comforts for the home.",
        "HOM",
        ["HearthCo", "Maple & Vine", "Nordhaus", "Casa Bella"],
        [
            ("Stainless Steel Saucepan", 24, 89, "heats evenly on gas, electric and induction hobs"),
            ("Ceramic Coffee Mug Set", 14, 49, "comes as four dishwasher-safe mugs in matte glaze"),
            ("Bamboo Cutting Board", 9, 39, "is gentle on knives and has a juice groove"),
            ("Cast Iron Skillet", 19, 79, "arrives pre-seasoned and goes from stovetop to oven"),
            ("Electric Kettle", 19, 99, "boils a full liter in under four minutes"),
            ("Cotton Bath Towel Set", 24, 89, "includes six soft, absorbent towels"),
            ("Glass Food Storage Containers", 19, 59, "keeps leftovers fresh with snap-lock lids"),
            ("Pour-Over Coffee Maker", 14, 59, "brews a clean, bright cup in a few minutes"),
        ],
    ),
    (
        "books",
        "Books",
        "Novels, memoirs and the occasional field guide.",
        "BOO",
        [],
        [
            ("Orchard", 9, 29, "a family saga set among apple trees"),
            ("Lighthouse", 9, 29, "a mystery on a storm-bound island"),
            ("Cartographer", 9, 29, "an adventure across unmapped mountains"),
            ("Harbor", 9, 29, "a love story in a fading fishing town"),
            ("Clockmaker", 9, 29, "a puzzle of gears, grief and a missing heir"),
            ("Atlas", 9, 29, "an epic fantasy about a stolen map of the world"),
            ("Garden", 9, 29, "a quiet memoir of growing things"),
            ("Observatory", 9, 29, "a science fiction tale of a signal from a dead star"),
        ],
    ),
    (
        "sports-outdoors",
        "Sports & Outdoors",
        "Gear for the gym, the trail and the campsite.",
        "SPO",
        ["Summit Trail", "PeakForm", "Ridgeline", "TerraGo"],
        [
            ("Yoga Mat", 15, 79, "is 6 mm thick with a non-slip texture on both sides"),
            ("Insulated Water Bottle", 12, 45, "keeps drinks cold for 24 hours and hot for 12"),
            ("Camping Tent", 59, 299, "sleeps two and pitches in under five minutes"),
            ("Hiking Backpack", 39, 189, "has a 40-liter main compartment and a rain cover"),
            ("Adjustable Dumbbell Set", 49, 249, "adjusts from 5 to 25 pounds with a twist"),
            ("Trail Running Shoes", 59, 159, "grip wet rock and drain quickly after stream crossings"),
            ("Resistance Band Set", 9, 39, "includes five bands from extra light to extra heavy"),
            ("Folding Camp Chair", 19, 89, "folds flat and holds up to 300 pounds"),
        ],
    ),
    (
        "beauty",
        "Beauty",
        "Skincare, haircare and makeup.",
        "BEA",
        ["Lumiere", "Velvet Bloom", "PureLeaf", "Aurora Skin"],
        [
            ("Vitamin C Serum", 12, 59, "brightens dull skin with a lightweight formula"),
            ("Hydrating Face Moisturizer", 11, 49, "locks in moisture without feeling greasy"),
            ("Mineral Sunscreen SPF 50", 9, 35, "protects without leaving a white cast"),
            ("Argan Oil Shampoo", 8, 29, "leaves hair soft and smelling faintly of citrus"),
            ("Matte Lipstick", 7, 29, "lasts through coffee and lunch"),
            ("Clay Face Mask", 9, 39, "draws out impurities in ten minutes"),
            ("Lavender Body Lotion", 7, 25, "soothes dry skin with shea butter and lavender oil"),
            ("Eyeshadow Palette", 14, 59, "holds twelve blendable shades from nude to smoky"),
        ],
    ),
    (
        "toys",
        "Toys",
        "Games, puzzles and things to build for kids of all ages.",
        "TOY",
        ["Tiny Tinkers", "Playnest", "BrightBox", "Wonderkin"],
        [
            ("Wooden Building Blocks", 19, 59, "comes as 100 smooth, painted blocks in a storage tub"),
            ("Remote Control Car", 24, 119, "reaches 15 mph and climbs over rough ground"),
            ("Plush Teddy Bear", 12, 45, "is extra soft and safe from birth"),
            ("Jigsaw Puzzle", 12, 34, "has 1000 pieces that lock firmly together"),
            ("Magnetic Tile Set", 29, 99, "lets kids build towers, houses and rockets"),
            ("Dinosaur Figure Set", 14, 44, "includes twelve detailed dinosaurs"),
            ("Kids Art Easel", 39, 129, "has a chalkboard side, a whiteboard side and a paper roll"),
            ("Family Board Game", 14, 49, "plays in 30 minutes for two to six players"),
        ],
    ),
]

MODELS = ["X2", "Pro", "Lite", "Max", "S3", "Air", "Plus", "Go", "Mini", "Neo"]
BOOK_ADJECTIVES = ["Silent", "Hidden", "Last", "Crimson", "Forgotten", "Midnight", "Golden", "Winter"]
BOOK_CLOSINGS = [
    "A book club favorite.",
    "Now in paperback for the first time.",
    "Winner of the Lantern Prize for debut fiction.",
    "Includes a reading group guide.",
]
BOOK_AUTHORS = ["Clara Whitmore", "Idris Okafor", "Mei Takahashi", "Tomas Lindqvist", "Ava Delgado"]
CLOSINGS = [
    "Backed by a one-year warranty.",
    "Ships in recyclable packaging.",
    "A customer favorite since it launched.",
    "Makes a thoughtful gift.",
    "Designed to last for years of daily use.",
    "Easy to clean and easy to store.",
]

REVIEWERS = [
    "Alex Kim", "Maria Garcia", "John Smith", "Aisha Bello", "Chen Wei", "Olivia Brown", "Noah Wilson",
    "Fatima Khan", "Lucas Martin", "Grace Lee", "Daniel Novak", "Hannah Schmidt", "Mateo Silva",
    "Yuki Sato", "Ethan Clark", "Zoe Adams", "Omar Haddad", "Isabel Costa", "Ryan Murphy", "Nina Petrova",
]  # fmt: skip

REVIEW_TITLES = {
    5: ["Absolutely love it", "Exceeded my expectations", "Five stars, no question", "Best purchase this year",
        "Highly recommend", "Perfect gift"],
    4: ["Very good", "Solid choice", "Happy with it", "Great value for the price", "Almost perfect"],
    3: ["It's okay", "Decent but not perfect", "Average", "Does the job"],
    2: ["Disappointing", "Not as described", "Expected more"],
    1: ["Broke after a week", "Would not buy again", "Waste of money"],
}  # fmt: skip

REVIEW_SENTENCES = {
    5: ["It works exactly as advertised.", "The quality is outstanding.", "I bought a second one for my sister.",
        "Shipping was fast and it arrived well packed.", "I use it every single day."],
    4: ["Good quality overall.", "It does what it should, with one small quirk.",
        "A little pricey, but worth it.", "The color is slightly different from the photos."],
    3: ["It is fine for the price.", "Some parts feel cheap.", "It works, but I expected a bit more.",
        "The instructions could be clearer."],
    2: ["It stopped working properly after a month.", "The size was smaller than I thought.",
        "Customer service was slow to answer."],
    1: ["It arrived damaged.", "It did not work at all out of the box.", "I returned it the next day."],
}  # fmt: skip

CUSTOMERS = [
    ("Emma Lopez", "742 Maple Street", "Springfield", "IL", "62704", "217-555-0142"),
    ("James Carter", "18 Harbor View Road", "Portland", "ME", "04101", "207-555-0187"),
    ("Priya Natarajan", "3300 Sunset Boulevard Apt 12", "Los Angeles", "CA", "90026", "323-555-0110"),
    ("Liam O'Connor", "56 Beacon Street", "Boston", "MA", "02108", "617-555-0163"),
    ("Sofia Rossi", "901 Lakeshore Drive", "Chicago", "IL", "60611", "312-555-0129"),
]
