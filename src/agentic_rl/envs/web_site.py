"""The generated shop behind ``web-v0``: catalogues, tasks, validation, scoring and search.

Task ``data`` (JSON; users may write their own)::

    {"kind": "buy" | "fact",
     "products": [{"id": "p01", "category": "scarf", "colour": "blue", "material": "wool", "size": "M",
                   "brand": "Nordic", "price": 24.99, "rating": 4.3}, ...],
     "constraints": {"category": "scarf", "colour": "blue", "max_price": 30.0},   # any of CONSTRAINT_KEYS
     "goal": null | "cheapest" | "best_rated",     # among the products meeting every constraint
     "field": "rating",                            # fact tasks: the attribute to report (FACT_FIELDS)
     "max_steps": 16}

A product's title is ``"{brand} {colour} {material} {category}"``; search matches title words only.
A *buy* task is scored by the fraction of its checks the bought product passes (each constraint, plus
the goal if any); a *fact* task names exactly one product (constraints + goal) whose ``field`` is the
answer.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

from agentic_rl.tasks.core import TaskFileError

# category: (plural, materials, sizes, (min price, max price))
CATEGORIES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[int, int]]] = {
    "scarf": ("scarves", ("wool", "cotton", "silk", "cashmere"), ("S", "M", "L"), (12, 60)),
    "mug": ("mugs", ("ceramic", "glass", "steel", "bamboo"), ("250 ml", "350 ml", "500 ml"), (6, 30)),
    "backpack": ("backpacks", ("nylon", "leather", "canvas", "polyester"), ("15 L", "20 L", "30 L"), (25, 120)),
    "lamp": ("lamps", ("metal", "wood", "glass", "ceramic"), ("small", "medium", "large"), (18, 90)),
    "sneakers": ("sneakers", ("leather", "canvas", "mesh", "suede"), ("40", "42", "44"), (35, 140)),
    "jacket": ("jackets", ("denim", "leather", "wool", "nylon"), ("S", "M", "L", "XL"), (40, 200)),
    "hat": ("hats", ("wool", "cotton", "straw", "felt"), ("S", "M", "L"), (10, 50)),
    "bottle": ("bottles", ("steel", "glass", "plastic", "aluminium"), ("500 ml", "750 ml", "1 L"), (8, 40)),
    "blanket": ("blankets", ("fleece", "wool", "cotton", "linen"), ("single", "double", "king"), (20, 110)),
    "chair": ("chairs", ("wood", "metal", "plastic", "rattan"), ("small", "medium", "large"), (30, 180)),
    "socks": ("socks", ("wool", "cotton", "bamboo", "nylon"), ("S", "M", "L"), (4, 20)),
    "wallet": ("wallets", ("leather", "canvas", "cork", "nylon"), ("slim", "standard", "large"), (10, 70)),
}
#: Held-out means unseen: test tasks are about product categories that never appear in training.
SPLIT_CATEGORIES = {"train": ("scarf", "mug", "backpack", "lamp", "sneakers", "jacket"),
                    "test": ("hat", "bottle", "blanket", "chair", "socks", "wallet")}
COLOURS = ("red", "blue", "green", "black", "white", "grey", "yellow", "pink", "brown", "navy")
BRANDS = ("Nordic", "Acme", "Lumo", "Terra", "Kite", "Orbit", "Vela", "Pico", "Harbor", "Zenith")
PRODUCT_FIELDS = ("category", "colour", "material", "size", "brand", "price", "rating")
CONSTRAINT_KEYS = ("category", "colour", "material", "size", "brand", "max_price")
FACT_FIELDS = ("price", "rating", "size", "material", "brand")
GOALS = (None, "cheapest", "best_rated")
MAX_STEPS = {0: 12, 1: 16, 2: 24}
_PAIRS = ("socks", "sneakers")  # "a pair of ...", not "a socks"

Product = dict[str, Any]


def title(product: Product) -> str:
    return f"{product['brand']} {product['colour']} {product['material']} {product['category']}"


def tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def search(products: list[Product], query: str) -> list[Product]:
    """Products sharing at least one word with ``query`` (title words and the category's plural), best
    first: more shared words rank higher, ties keep catalogue order."""
    wanted = tokens(query)
    scored = []
    for index, product in enumerate(products):
        words = tokens(title(product)) | tokens(CATEGORIES.get(product["category"], ("",))[0])
        score = len(wanted & words)
        if score:
            scored.append((-score, index, product))
    return [p for _, _, p in sorted(scored, key=lambda item: item[:2])]


# -- scoring -------------------------------------------------------------------------------------
def checks(product: Product, data: dict[str, Any]) -> dict[str, bool]:
    """Each constraint (and the goal, if any) → whether ``product`` passes it."""
    out = {}
    for key, value in data["constraints"].items():
        out[key] = product["price"] <= value + 1e-9 if key == "max_price" else product[key] == value
    goal = data.get("goal")
    if goal is not None:
        best = _best(data["products"], data)
        out[goal] = best is not None and product["id"] == best["id"]
    return out


def _meets_constraints(product: Product, data: dict[str, Any]) -> bool:
    return all(product["price"] <= v + 1e-9 if k == "max_price" else product[k] == v
               for k, v in data["constraints"].items())


def _best(products: list[Product], data: dict[str, Any]) -> Product | None:
    pool = [p for p in products if _meets_constraints(p, data)]
    if not pool:
        return None
    if data.get("goal") == "cheapest":
        return min(pool, key=lambda p: p["price"])
    return max(pool, key=lambda p: p["rating"])


def targets(data: dict[str, Any]) -> list[Product]:
    """The products that pass every check (for a fact task: the one product it asks about)."""
    if data.get("goal") is not None:
        best = _best(data["products"], data)
        return [best] if best is not None else []
    return [p for p in data["products"] if _meets_constraints(p, data)]


def field_text(product: Product, field: str) -> str:
    value = product[field]
    return f"{value:.2f}" if field == "price" else str(value)


def answer_matches(given: str, expected: str) -> bool:
    """Lenient comparison: case, spaces, ``$``, ``/5`` and number formatting do not matter."""
    def norm(text: str) -> str:
        return re.sub(r"[\s$]|/5$", "", text.strip().lower().rstrip("."))
    a, b = norm(given), norm(expected)
    try:
        return math.isclose(float(a), float(b), abs_tol=0.005)
    except ValueError:
        return a == b


# -- validation ----------------------------------------------------------------------------------
def validate_data(data: dict[str, Any], where: str) -> None:
    """Raise :class:`TaskFileError` naming ``where`` and the field if ``data`` is not a valid shop task."""
    kind = data.get("kind")
    if kind not in ("buy", "fact"):
        raise TaskFileError(f"{where}: field 'data.kind' must be 'buy' or 'fact', got {kind!r}")
    products = data.get("products")
    if not isinstance(products, list) or not products:
        raise TaskFileError(f"{where}: field 'data.products' must be a non-empty list")
    ids = set()
    for i, product in enumerate(products):
        _validate_product(product, where, f"data.products[{i}]")
        if product["id"] in ids:
            raise TaskFileError(f"{where}: field 'data.products[{i}].id' repeats {product['id']!r}")
        ids.add(product["id"])
    constraints = data.get("constraints")
    if not isinstance(constraints, dict) or not constraints or set(constraints) - set(CONSTRAINT_KEYS):
        raise TaskFileError(f"{where}: field 'data.constraints' must be an object with keys from {CONSTRAINT_KEYS}")
    if data.get("goal") not in GOALS:
        raise TaskFileError(f"{where}: field 'data.goal' must be one of {GOALS}, got {data.get('goal')!r}")
    if kind == "fact" and data.get("field") not in FACT_FIELDS:
        raise TaskFileError(f"{where}: field 'data.field' must be one of {FACT_FIELDS}, got {data.get('field')!r}")
    max_steps = data.get("max_steps", 1)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        raise TaskFileError(f"{where}: field 'data.max_steps' must be an integer >= 1, got {max_steps!r}")
    found = targets(data)
    if not found or (kind == "fact" and len(found) != 1):
        need = "exactly one product" if kind == "fact" else "at least one product"
        raise TaskFileError(f"{where}: field 'data.constraints' must describe {need}; {len(found)} match")


def _validate_product(product: Any, where: str, field: str) -> None:
    if not isinstance(product, dict):
        raise TaskFileError(f"{where}: field '{field}' must be an object, got {product!r:.60}")
    for name in ("id", *PRODUCT_FIELDS):
        if name not in product:
            raise TaskFileError(f"{where}: field '{field}' is missing {name!r}")
        numeric = name in ("price", "rating")
        value = product[name]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) if numeric \
            else isinstance(value, str) and value
        if not ok:
            raise TaskFileError(f"{where}: field '{field}.{name}' must be a "
                                f"{'number' if numeric else 'non-empty string'}, got {value!r:.60}")


# -- prompts -------------------------------------------------------------------------------------
def describe(data: dict[str, Any]) -> str:
    """``"cheapest blue wool scarf in size M"``-style noun phrase for the task's product."""
    c = data["constraints"]
    words = [c.get("brand"), c.get("colour"), c.get("material"), c.get("category", "item")]
    phrase = " ".join(w for w in words if w)
    if "size" in c:
        phrase += f" in size {c['size']}"
    goal = {"cheapest": "cheapest ", "best_rated": "best-rated "}.get(data.get("goal") or "", "")
    return goal + phrase


def canonical_query(data: dict[str, Any]) -> str:
    """The search words that name the task's product: its title words among the constraints."""
    c = data["constraints"]
    return " ".join(c[k] for k in ("brand", "colour", "material", "category") if k in c)


def prompt(data: dict[str, Any], variant: int = 0) -> str:
    """The instruction for a task; ``variant`` 1 and 2 are paraphrases (the ``paraphrase`` perturbation)."""
    phrase = describe(data)
    if data.get("goal") is not None or data["kind"] == "fact":  # a fact task names one product
        phrase = "the " + phrase
    elif data["constraints"].get("category") in _PAIRS:
        phrase = "a pair of " + phrase
    else:
        phrase = ("an " if phrase[0].lower() in "aeiou" else "a ") + phrase
    price = f" for at most ${data['constraints']['max_price']:.2f}" if "max_price" in data["constraints"] else ""
    if data["kind"] == "buy":
        templates = ("Buy {p}{m}.", "I need {p}{m}. Find it in the shop and purchase it.",
                     "Please order {p}{m} for me.")
    else:
        templates = ("What is the {f} of {p}{m}? Reply with <answer>...</answer>.",
                     "Look up {p}{m} and report its {f} in <answer>...</answer>.",
                     "Tell me, in <answer>...</answer>, the {f} of {p}{m}.")
    return templates[variant].format(p=phrase, m=price, f=data.get("field", ""))


# -- generation ----------------------------------------------------------------------------------
def make_product(rng: random.Random, category: str, **fixed: Any) -> Product:
    _, materials, sizes, (low, high) = CATEGORIES[category]
    product = {"id": "", "category": category, "colour": rng.choice(COLOURS), "material": rng.choice(materials),
               "size": rng.choice(sizes), "brand": rng.choice(BRANDS),
               "price": rng.randrange(low, high) + 0.99, "rating": round(rng.uniform(2.5, 5.0), 1)}
    product.update(fixed)
    return product


def near_miss(rng: random.Random, base: Product, keys: list[str], breakable: list[str],
              data: dict[str, Any]) -> Product:
    """A product like ``base`` on the constraint ``keys`` except one from ``breakable``, which it fails;
    everything else is drawn afresh."""
    _, materials, sizes, _ = CATEGORIES[base["category"]]
    broken = rng.choice(breakable)
    product = {**make_product(rng, base["category"]), **{k: base[k] for k in keys if k in PRODUCT_FIELDS}}
    options = {"colour": COLOURS, "material": materials, "size": sizes, "brand": BRANDS}
    if broken == "max_price":
        product["price"] = data["constraints"]["max_price"] + rng.randrange(1, 30) + 0.99
    else:
        product[broken] = rng.choice([v for v in options[broken] if v != base[broken]])
        if "max_price" in data["constraints"]:
            product["price"] = min(product["price"], data["constraints"]["max_price"] - 0.5)
    return product


def generate_task_data(rng: random.Random, level: int, kind: str, categories: tuple[str, ...]) -> dict[str, Any]:
    """One random shop task (see the module docstring). Level 0: the category and one attribute; level 1:
    several attributes and a price bound; level 2: a superlative ("cheapest", "best-rated") that needs
    comparing products, or many look-alike products so the item sits on a later results page."""
    category = rng.choice(categories)
    target = make_product(rng, category)
    goal = None
    if kind == "buy":
        keys = ([rng.choice(["colour", "material"])], rng.sample(["colour", "material", "size"], 2) + ["max_price"],
                ["colour", "material", "size", "max_price"])[level]
    else:
        keys = (["colour"], ["brand", "colour", "material"], ["colour", "material", "size"])[level]
    if level == 2 and rng.random() < 0.5:
        keys, goal = [rng.choice(["colour", "material"])], rng.choice(["cheapest", "best_rated"])
    if goal == "cheapest":
        target["price"] = CATEGORIES[category][3][0] + rng.randrange(0, 4) + 0.99
    elif goal == "best_rated":
        target["rating"] = round(rng.uniform(4.6, 5.0), 1)
    constraints: dict[str, Any] = {"category": category}
    for key in keys:
        constraints[key] = float(5 * math.ceil((target["price"] + rng.uniform(0.5, 8)) / 5)) \
            if key == "max_price" else target[key]
    data: dict[str, Any] = {"kind": kind, "constraints": constraints, "goal": goal, "max_steps": MAX_STEPS[level]}
    if kind == "fact":
        data["field"] = rng.choice((["price", "rating"], ["rating", "size"], ["rating", "brand", "size"])[level])
    others = [k for k in keys if k != "max_price"] + (["max_price"] if "max_price" in keys else [])
    # level 2 look-alikes keep the title words, so they rank with the target and paginate
    breakable = [k for k in others if k in ("size", "max_price")] if level == 2 and goal is None else others
    products = [target] + [near_miss(rng, target, others, breakable, data) for _ in range((6, 9, 12)[level])]
    for _ in range(rng.randint(3, 5) if goal else 0):
        rival = {**make_product(rng, category), **{k: target[k] for k in keys}}
        if goal == "cheapest":
            rival["price"] = target["price"] + rng.randrange(1, 30)
        else:
            rival["rating"] = round(rng.uniform(2.5, target["rating"] - 0.1), 1)
        products.append(rival)
    fillers = [c for c in categories if c != category]
    products += [make_product(rng, rng.choice(fillers)) for _ in range(8)]
    rng.shuffle(products)
    if level == 2:
        _push_back(products, target, canonical_query(data))
    data["products"] = [{**p, "id": f"p{i + 1:02d}"} for i, p in enumerate(products)]
    return data


def _push_back(products: list[Product], target: Product, query: str, rank: int = 5) -> None:
    """Move ``target`` behind the first ``rank`` results of ``query`` (when there are that many), so
    finding it needs the next results page."""
    ties = [p for p in search(products, query) if tokens(query) <= tokens(title(p))]
    ahead = [p for p in ties if p is not target][:rank]
    if len(ahead) < rank:
        return
    products.remove(target)
    products.insert(products.index(ahead[-1]) + 1, target)
