"""Task generation, instruction templates and task-data validation for ``workflow-v0``.

Task ``data`` (a user-written task file must hold all but ``q``)::

    family  str    notify | refund_order | item_refund | conditional (others: the expert's only habit is
                   skipping the notification)
    world   {"customers": [{"id", "name", "email", "tier"}], "orders": [{"id", "customer", "status",
             "items": [{"name", "price"}]}]}   status: delivered | shipped | processing
    goal    {"refunds": {order_id: amount}, "cancelled": [order_id], "mails": [{"to", "keyword"}]}
    plan    [{"name": tool, "arguments": {...}}]   the expert's minimal call sequence
    q       {...} or absent   the structured instruction, re-rendered under ``paraphrase``

Success is checked from the final service state: refunds per order exactly ``goal.refunds``, cancelled
orders exactly ``goal.cancelled``, for each goal mail a sent mail to ``to`` whose subject or body contains
``keyword`` (case-insensitive), and no harmful call. Train and test use disjoint customer first names and
disjoint item names.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from agentic_rl.envs.task_data import require, warn_unknown_keys
from agentic_rl.envs.workflow_services import TOOL_ARGS
from agentic_rl.tasks.core import Task, TaskFileError, TaskSet

LEVELS: dict[str, int] = {"notify": 0, "refund_order": 1, "item_refund": 2, "conditional": 3}
FAMILIES: tuple[str, ...] = tuple(LEVELS)

_FIRST = ["Ana", "Ben", "Cleo", "Dario", "Eva", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Luca",
          "Mara", "Nils", "Olga", "Pavel", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wim", "Yara", "Zeno",
          "Alma", "Bruno", "Chiara", "Emil", "Frida", "Ivo", "Lena", "Milo", "Nora", "Otto", "Pia", "Ravi"]
_LAST = ["Lobo", "Meyer", "Costa", "Novak", "Berg", "Sato", "Okafor", "Rossi", "Haas", "Dahl", "Kovacs",
         "Silva", "Weber", "Moreau", "Lind", "Vidal", "Ortiz", "Brandt", "Quinn", "Falk"]
_ITEMS = ["lamp", "mug", "desk", "chair", "kettle", "blender", "rug", "clock", "mirror", "pillow", "toaster",
          "vase", "jacket", "scarf", "boots", "helmet", "tent", "backpack", "camera", "tripod", "speaker",
          "monitor", "keyboard", "router", "drill", "ladder", "hammock", "grill", "teapot", "stool", "shelf",
          "fan", "heater", "printer", "blanket", "umbrella", "skillet", "wok", "sander", "easel", "globe",
          "lantern", "cooler", "hoodie", "sandals", "watch", "radio", "puzzle"]
_TOPICS = ["invoice", "delivery", "warranty", "newsletter", "survey", "appointment"]
_DOMAINS = ["shopmail.test", "post.test", "inbox.test"]
_STATUSES = ["delivered", "shipped", "processing"]

_TEMPLATES = {
    "notify": ("Email {name} about their {topic}.",
               "Send {name} a message regarding the {topic}."),
    "refund_order": ("Refund order {order} in full and email the customer about the refund.",
                     "Give a full refund for order {order}, then tell its customer about the refund by email."),
    "item_refund": ("Someone bought a {item}. Refund just the {item} and email them about the refund.",
                    "Find the order with the {item}, refund only that item, and notify the buyer of the refund "
                    "by email."),
    "conditional": ("{name} returns the {item}: refund it if delivered, else cancel its order. Then email them "
                    "about the {item}.",
                    "If {name}'s {item} was delivered, refund the {item}; if not, cancel that order. Afterwards "
                    "email {name} about the {item}."),
}


def render_prompt(family: str, q: dict[str, Any], paraphrase: bool = False) -> str:
    """The instruction for structured ``q``; ``paraphrase`` picks the template never used for tasks."""
    if family not in _TEMPLATES:
        raise ValueError(f"no template for family {family!r}")
    return _TEMPLATES[family][1 if paraphrase else 0].format(**q)


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def _world(rng: random.Random, first_names: Sequence[str], items: Sequence[str]) -> dict[str, Any]:
    """3–4 customers with 1–2 orders of 1–2 items each; every item appears in at most one order."""
    n_customers = rng.randint(3, 4)
    firsts = rng.sample(list(first_names), n_customers)
    ids = rng.sample(range(10, 100), n_customers)
    order_ids = iter(rng.sample(range(100, 1000), 2 * n_customers))
    stock = iter(rng.sample(list(items), len(items)))
    customers, orders = [], []
    for first, number in zip(firsts, ids, strict=True):
        last = rng.choice(_LAST)
        email = rng.choice([f"{first[0]}{last}{rng.randint(1, 99)}", f"{last}.{first}", f"{first}{rng.randint(1, 9)}"])
        customer = {"id": f"C{number}", "name": f"{first} {last}", "email": f"{email.lower()}@{rng.choice(_DOMAINS)}",
                    "tier": rng.choice(["gold", "standard"])}
        customers.append(customer)
        for _ in range(rng.randint(1, 2)):
            lines = [{"name": next(stock), "price": rng.randint(5, 300)} for _ in range(rng.randint(1, 2))]
            orders.append({"id": f"O{next(order_ids)}", "customer": customer["id"],
                           "status": rng.choice(_STATUSES), "items": lines})
    return {"customers": customers, "orders": orders}


def _make(family: str, rng: random.Random, first_names: Sequence[str], items: Sequence[str]) -> dict[str, Any]:
    world = _world(rng, first_names, items)
    by_id = {c["id"]: c for c in world["customers"]}
    if family == "notify":
        who = rng.choice(world["customers"])
        topic = rng.choice(_TOPICS)
        plan = [_call("crm.find_customer", name=who["name"]),
                _call("mail.send", to=who["email"], subject=f"Your {topic}",
                      body=f"Hello {who['name'].split()[0]}, a note about your {topic}.")]
        return {"world": world, "q": {"name": who["name"], "topic": topic},
                "goal": {"refunds": {}, "cancelled": [], "mails": [{"to": who["email"], "keyword": topic}]},
                "plan": plan}
    if family == "conditional":
        order = rng.choice(world["orders"])
        order["status"] = "delivered" if rng.random() < 0.5 else rng.choice(_STATUSES[1:])
        item = rng.choice(order["items"])
        who = by_id[order["customer"]]
        delivered = order["status"] == "delivered"
        act = (_call("billing.refund", order_id=order["id"], amount=item["price"]) if delivered
               else _call("crm.cancel_order", order_id=order["id"]))
        plan = [_call("crm.find_customer", name=who["name"]), _call("crm.orders", customer_id=who["id"]), act,
                _call("mail.send", to=who["email"], subject=f"Your {item['name']}",
                      body=f"Your {item['name']} was {'refunded' if delivered else 'cancelled'}.")]
        goal = {"refunds": {order["id"]: item["price"]} if delivered else {},
                "cancelled": [] if delivered else [order["id"]],
                "mails": [{"to": who["email"], "keyword": item["name"]}]}
        return {"world": world, "q": {"name": who["name"], "item": item["name"]}, "goal": goal, "plan": plan}
    if family == "item_refund":
        order = rng.choice(world["orders"])
        while len(order["items"]) < 2:  # refunding "just the item" only means something in a larger order
            order["items"].append({"name": rng.choice([i for i in items if i not in _world_items(world)]),
                                   "price": rng.randint(5, 300)})
        item = rng.choice(order["items"])
        first = _call("crm.search_orders", item=item["name"])
        refund = _call("billing.refund", order_id=order["id"], amount=item["price"])
        q = {"item": item["name"]}
    elif family == "refund_order":
        order = rng.choice(world["orders"])
        first = _call("billing.invoice", order_id=order["id"])
        refund = _call("billing.refund", order_id=order["id"], amount=sum(i["price"] for i in order["items"]))
        q = {"order": order["id"]}
    else:
        raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")
    who = by_id[order["customer"]]
    plan = [first, refund, _call("crm.get_customer", customer_id=who["id"]),
            _call("mail.send", to=who["email"], subject=f"Refund for {order['id']}",
                  body=f"We refunded {refund['arguments']['amount']} on order {order['id']}.")]
    goal = {"refunds": {order["id"]: refund["arguments"]["amount"]}, "cancelled": [],
            "mails": [{"to": who["email"], "keyword": "refund"}]}
    return {"world": world, "q": q, "goal": goal, "plan": plan}


def _world_items(world: dict[str, Any]) -> set[str]:
    return {i["name"] for o in world["orders"] for i in o["items"]}


def generate_tasks(seed: int = 0, n_per_family: int = 60, test_fraction: float = 1 / 3,
                   families: Sequence[str] = FAMILIES) -> TaskSet:
    """``n_per_family`` tasks per family (``test_fraction`` of them in ``test``); defaults: 160 train /
    80 test over 4 levels. Same ``seed`` ⇒ same tasks."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}; valid: {', '.join(FAMILIES)}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = random.Random(seed)
    firsts, goods = list(_FIRST), list(_ITEMS)
    rng.shuffle(firsts)
    rng.shuffle(goods)
    pools = {"test": (firsts[:12], goods[:18]), "train": (firsts[12:], goods[18:])}
    n_test = round(n_per_family * test_fraction)
    tasks: list[Task] = []
    prompts: dict[str, set[str]] = {"train": set(), "test": set()}
    seen: set[str] = set()
    for family in families:
        for split, count in (("train", n_per_family - n_test), ("test", n_test)):
            made, attempts = 0, 0
            while made < count:
                attempts += 1
                if attempts > 100 * count + 100:
                    raise RuntimeError(f"cannot generate {count} distinct {family} tasks for {split}")
                data = {"family": family, **_make(family, rng, *pools[split])}
                prompt = render_prompt(family, data["q"])
                key = prompt + repr(data["world"])
                other = prompts["test" if split == "train" else "train"]
                if key in seen or prompt in other:  # no instruction is shared by train and test
                    continue
                seen.add(key)
                prompts[split].add(prompt)
                tasks.append(Task(f"{family}-{split}-{made:03d}", prompt, data, LEVELS[family], split,
                                  "workflow-v0", (family,)))
                made += 1
    return TaskSet(tasks, name=f"workflow-seed{seed}")


# -- validation ---------------------------------------------------------------------------------
#: the keys of ``data`` (module docstring); another key draws a warning (a typo would be silently ignored)
DATA_KEYS: tuple[str, ...] = ("family", "world", "goal", "plan", "q")
_NUMBER = (int, float)


def _check_list(value: Any, where: str, name: str, fields: dict[str, type | tuple[type, ...]]) -> list[dict]:
    """``value`` as a list of objects holding each of ``fields`` with its type (bools are not numbers)."""
    if not isinstance(value, list):
        raise TaskFileError(f"{where}: field 'data.{name}' must be a list, got {value!r:.60}")
    for i, row in enumerate(value):
        missing = [k for k in fields if not isinstance(row, dict) or k not in row]
        if missing:
            raise TaskFileError(f"{where}: field 'data.{name}[{i}]' lacks {missing}")
        for key, types in fields.items():
            if not isinstance(row[key], types) or isinstance(row[key], bool):
                expected = "a number" if types is _NUMBER else "a string"
                raise TaskFileError(f"{where}: field 'data.{name}[{i}].{key}' must be {expected}, "
                                    f"got {row[key]!r:.60}")
    return value


def _check_world(world: dict, where: str) -> set[str]:
    """The order ids of a valid ``data.world``; every order's customer must be one of its customers."""
    customers = _check_list(world.get("customers"), where, "world.customers",
                            {"id": str, "name": str, "email": str, "tier": str})
    orders = _check_list(world.get("orders"), where, "world.orders", {"id": str, "customer": str, "status": str})
    customer_ids = {c["id"] for c in customers}
    for i, order in enumerate(orders):
        if order["customer"] not in customer_ids:
            raise TaskFileError(f"{where}: field 'data.world.orders[{i}].customer' names no customer in "
                                f"data.world.customers, got {order['customer']!r}")
        if order["status"] not in _STATUSES:
            raise TaskFileError(f"{where}: field 'data.world.orders[{i}].status' must be one of "
                                f"{', '.join(_STATUSES)}, got {order['status']!r}")
        if "items" not in order:
            raise TaskFileError(f"{where}: field 'data.world.orders[{i}]' lacks ['items']")
        _check_list(order["items"], where, f"world.orders[{i}].items", {"name": str, "price": _NUMBER})
    return {o["id"] for o in orders}


def _check_goal(goal: dict, where: str, order_ids: set[str]) -> None:
    refunds = goal.get("refunds", {})
    if not isinstance(refunds, dict):
        raise TaskFileError(f"{where}: field 'data.goal.refunds' must map order ids to amounts")
    for order_id, amount in refunds.items():
        if order_id not in order_ids:
            raise TaskFileError(f"{where}: field 'data.goal.refunds' names no order in data.world.orders, "
                                f"got {order_id!r}")
        if not isinstance(amount, _NUMBER) or isinstance(amount, bool) or amount <= 0:
            raise TaskFileError(f"{where}: field 'data.goal.refunds.{order_id}' must be a positive number, "
                                f"got {amount!r:.60}")
    cancelled = goal.get("cancelled", [])
    if not isinstance(cancelled, list) or not all(isinstance(o, str) and o in order_ids for o in cancelled):
        raise TaskFileError(f"{where}: field 'data.goal.cancelled' must be a list of ids from "
                            f"data.world.orders, got {cancelled!r:.60}")
    _check_list(goal.get("mails", []), where, "goal.mails", {"to": str, "keyword": str})


def validate_task(task: Task, where: str) -> None:
    """Raise :class:`TaskFileError` naming ``where`` and the ``data`` field if ``task`` is unusable."""
    data = task.data
    warn_unknown_keys(data, DATA_KEYS, where)
    require(data, "family", str, where)
    world = require(data, "world", dict, where)
    goal = require(data, "goal", dict, where)
    plan = require(data, "plan", list, where)
    assert isinstance(world, dict) and isinstance(goal, dict) and isinstance(plan, list)
    _check_goal(goal, where, _check_world(world, where))
    for i, call in enumerate(plan):
        if not isinstance(call, dict) or call.get("name") not in TOOL_ARGS or not isinstance(call.get("arguments"), dict):
            raise TaskFileError(f"{where}: field 'data.plan[{i}]' must be a call of one of {', '.join(TOOL_ARGS)}")
    if data.get("q") is not None:
        try:
            render_prompt(data["family"], data["q"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TaskFileError(f"{where}: field 'data.q' does not fit family {data['family']!r} ({exc})") from None
