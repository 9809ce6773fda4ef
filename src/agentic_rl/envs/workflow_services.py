"""The mock services behind ``workflow-v0``: a CRM (customers, orders), billing (invoices, refunds) and
mail (an outbox), with their tools.

:class:`Services` holds one episode's mutable state, built from a task's ``data["world"]``. Each tool method
returns the observation text or raises :class:`ToolFailure`. Whether a state change was *harmful* is not
decided here (the services do what they are told, like real ones); the env judges calls against the goal.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from agentic_rl.envs.tool_use_tools import ToolFailure, format_number, to_number

#: canonical tool name -> argument names ("name|email": exactly one of the two)
TOOL_ARGS: dict[str, tuple[str, ...]] = {
    "crm.find_customer": ("name|email",),
    "crm.get_customer": ("customer_id",),
    "crm.orders": ("customer_id",),
    "crm.search_orders": ("item",),
    "crm.cancel_order": ("order_id",),
    "crm.delete_customer": ("customer_id",),
    "billing.invoice": ("order_id",),
    "billing.refund": ("order_id", "amount"),
    "mail.send": ("to", "subject", "body"),
}
#: tools that change state (never "repeated_action": doing them twice is an action of its own)
WRITE_TOOLS = frozenset({"crm.cancel_order", "crm.delete_customer", "billing.refund", "mail.send"})
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", re.I)


class Services:
    """One episode's CRM + billing + mail state. ``style`` names a presentation perturbation
    (``distractors``, ``reordered_results``) or is empty."""

    def __init__(self, world: dict[str, Any], style: str = ""):
        world = copy.deepcopy(world)
        self.customers: dict[str, dict[str, Any]] = {c["id"]: c for c in world["customers"]}
        self.orders: dict[str, dict[str, Any]] = {o["id"]: o for o in world["orders"]}
        self.refunds: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.deleted: list[str] = []
        self.outbox: list[dict[str, str]] = []
        self.style = style

    # -- derived state --------------------------------------------------------------------------
    def paid(self, order_id: str) -> float:
        return float(sum(item["price"] for item in self.orders[order_id]["items"]))

    def refunded(self, order_id: str) -> float:
        return float(sum(r["amount"] for r in self.refunds if r["order_id"] == order_id))

    def snapshot(self) -> dict[str, Any]:
        """The JSON-serialisable service state (what success is checked against)."""
        refunded = {}
        for r in self.refunds:
            refunded[r["order_id"]] = refunded.get(r["order_id"], 0.0) + r["amount"]
        return {"refunded": refunded, "cancelled": list(self.cancelled), "deleted": list(self.deleted),
                "outbox": [dict(m) for m in self.outbox]}

    # -- presentation ---------------------------------------------------------------------------
    def _customer_text(self, c: dict[str, Any]) -> str:
        fields = [c["id"], c["name"], c["email"], c["tier"]]
        if self.style == "distractors":
            fields += [f"phone {c.get('phone', '555-0100')}", f"since {c.get('since', 2019)}"]
        if self.style == "reordered_results":
            fields = fields[1:] + [fields[0]]
        return ", ".join(str(f) for f in fields)

    def _order_text(self, o: dict[str, Any], with_customer: bool = False) -> str:
        items = ", ".join(f"{i['name']} {format_number(i['price'])}" for i in o["items"])
        status = "cancelled" if o["id"] in self.cancelled else o["status"]
        who = f" by {o['customer']}" if with_customer else ""
        if self.style == "reordered_results":
            return f"{items} ({status}) = {o['id']}{who}"
        extra = f", placed {o.get('placed', 'Mon')}" if self.style == "distractors" else ""
        return f"{o['id']}{who}: {items} ({status}{extra})"

    def _listing(self, parts: list[str], empty: str) -> str:
        if self.style == "reordered_results":
            parts = parts[::-1]
        return "; ".join(parts) if parts else empty

    # -- lookups --------------------------------------------------------------------------------
    def _customer(self, customer_id: str) -> dict[str, Any]:
        c = self.customers.get(customer_id.strip().upper())
        if c is None or c["id"] in self.deleted:
            raise ToolFailure(f"no customer {customer_id.strip()[:20]!r}")
        return c

    def _order(self, order_id: str) -> dict[str, Any]:
        o = self.orders.get(order_id.strip().upper())
        if o is None:
            raise ToolFailure(f"no order {order_id.strip()[:20]!r}")
        return o

    # -- tools ----------------------------------------------------------------------------------
    def find_customer(self, name: str | None = None, email: str | None = None) -> str:
        key, wanted = ("name", name) if name is not None else ("email", email)
        assert wanted is not None
        hits = [c for c in self.customers.values()
                if c["id"] not in self.deleted and c[key].lower() == wanted.strip().lower()]
        return self._listing([self._customer_text(c) for c in hits], "No customer found.")

    def get_customer(self, customer_id: str) -> str:
        return self._customer_text(self._customer(customer_id))

    def customer_orders(self, customer_id: str) -> str:
        c = self._customer(customer_id)
        mine = [self._order_text(o) for o in self.orders.values() if o["customer"] == c["id"]]
        return self._listing(mine, "No orders.")

    def search_orders(self, item: str) -> str:
        wanted = item.strip().lower()
        hits = [self._order_text(o, with_customer=True) for o in self.orders.values()
                if any(i["name"].lower() == wanted for i in o["items"])]
        return self._listing(hits, "No orders found.")

    def invoice(self, order_id: str) -> str:
        o = self._order(order_id)
        paid, refunded = format_number(self.paid(o["id"])), format_number(self.refunded(o["id"]))
        if self.style == "reordered_results":
            return f"paid {paid}, refunded {refunded}: {o['id']} for {o['customer']}"
        return f"{o['id']} for {o['customer']}: paid {paid}, refunded {refunded}"

    def refund(self, order_id: str, amount: Any) -> str:
        o = self._order(order_id)
        value = to_number(amount)
        if value is None or value <= 0:
            raise ToolFailure(f"amount must be a positive number, got {str(amount)[:20]!r}", "bad_arguments")
        if o["id"] in self.cancelled:
            raise ToolFailure(f"{o['id']} is cancelled")
        if value > self.paid(o["id"]) - self.refunded(o["id"]) + 1e-9:
            raise ToolFailure(f"{format_number(value)} exceeds the refundable balance of {o['id']}")
        self.refunds.append({"order_id": o["id"], "amount": value})
        return f"Refunded {format_number(value)} on {o['id']}."

    def cancel_order(self, order_id: str) -> str:
        o = self._order(order_id)
        if o["id"] in self.cancelled:
            raise ToolFailure(f"{o['id']} is already cancelled")
        if o["status"] == "delivered":
            raise ToolFailure(f"{o['id']} was delivered and cannot be cancelled")
        self.cancelled.append(o["id"])
        return f"Cancelled {o['id']}."

    def delete_customer(self, customer_id: str) -> str:
        c = self._customer(customer_id)
        self.deleted.append(c["id"])
        return f"Deleted {c['id']}."

    def send_mail(self, to: str, subject: str, body: str) -> str:
        if not _EMAIL.match(to.strip()):
            raise ToolFailure(f"'to' must be an email address, got {to.strip()[:30]!r}", "bad_arguments")
        self.outbox.append({"to": to.strip(), "subject": subject, "body": body})
        return f"Sent to {to.strip()}."

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Run canonical ``tool`` with checked ``arguments``; returns the observation text."""
        a = arguments
        if tool == "crm.find_customer":
            return self.find_customer(a.get("name"), a.get("email"))
        if tool == "crm.get_customer":
            return self.get_customer(a["customer_id"])
        if tool == "crm.orders":
            return self.customer_orders(a["customer_id"])
        if tool == "crm.search_orders":
            return self.search_orders(a["item"])
        if tool == "crm.cancel_order":
            return self.cancel_order(a["order_id"])
        if tool == "crm.delete_customer":
            return self.delete_customer(a["customer_id"])
        if tool == "billing.invoice":
            return self.invoice(a["order_id"])
        if tool == "billing.refund":
            return self.refund(a["order_id"], a["amount"])
        assert tool == "mail.send", tool
        return self.send_mail(a["to"], a["subject"], a["body"])


def argument_problem(tool: str, arguments: dict[str, Any]) -> str:
    """Why ``arguments`` don't fit ``tool`` (empty string when they do)."""
    expected = TOOL_ARGS[tool]
    if expected == ("name|email",):
        given = [k for k in ("name", "email") if k in arguments]
        if len(given) != 1 or set(arguments) - {"name", "email"}:
            return f"{tool} takes exactly one of (name, email)"
        return "" if isinstance(arguments[given[0]], str) else f"'{given[0]}' must be a string"
    unknown = sorted(set(arguments) - set(expected))
    missing = [a for a in expected if a not in arguments]
    if unknown or missing:
        return f"{tool} takes ({', '.join(expected)})" + (f"; unknown: {', '.join(unknown)[:40]}" if unknown else "")
    for name in expected:
        if name != "amount" and not isinstance(arguments[name], str):
            return f"'{name}' must be a string"
    return ""
