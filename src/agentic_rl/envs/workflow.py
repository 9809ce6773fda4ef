"""``workflow-v0``: orchestrate stateful mock services (CRM, billing, mail) to reach a goal state.

The agent calls tools such as ``crm.search_orders(item)``, ``billing.refund(order_id, amount)`` and
``mail.send(to, subject, body)`` (see :data:`~agentic_rl.envs.workflow_services.TOOL_ARGS`), then finishes
with ``<answer>done</answer>``. Levels (``data["family"]``): 0 ``notify`` (find a customer, email them),
1 ``refund_order`` (refund an order in full, notify), 2 ``item_refund`` (find who bought an item, refund only
that item, notify), 3 ``conditional`` (refund if delivered, else cancel; notify).

**Success** is checked from the final service state, never from the agent's words (see
:mod:`agentic_rl.envs.workflow_tasks`), whenever the episode ends (finish or step budget).

**Harmful calls** execute (services obey) but are penalised, recorded in ``state()["harmful"]`` and make
success impossible: a refund pushing an order's refunds above the goal (wrong order, full amount instead of
the item, refunding twice), cancelling an order the goal keeps, deleting a customer, mailing anyone the goal
does not name. ``info["error"] = "harmful_action"``.

Reward per step (terms in ``info["reward_terms"]``, summing to the reward):
``step_cost`` −0.02 per tool call that ran; ``shaping/subgoal`` +0.1 the first time each goal sub-state
(a goal refund complete, a goal cancellation, a goal mail sent) is reached — each once, so shaping never
exceeds 0.1 × the number of sub-goals; ``harmful_action`` −0.5; ``invalid_action`` −0.1 (parse error, unknown
tool, bad arguments, tool error); ``outcome`` +1.0 at the episode's end when the goal state is met.
Repeating an identical read-only call gives ``repeated_action`` and the step cost only.

Expert (``expert_action(skill)``): skill 1.0 follows the task's minimal plan. Below 1.0 it picks, once per
episode with probability ``1 − skill``, one mistake its family allows: ``guess_email`` (notify: mails a
guessed address without looking the customer up), ``skip_notify`` (never sends the mail), ``full_refund``
(refunds the whole order instead of the item), ``ignore_condition`` (refunds although it should cancel).
``state()["expert_mistake"]`` shows the choice ("" = none, None = not decided yet).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, ClassVar

from agentic_rl.agent.actions import Action, answer, tool_call
from agentic_rl.env.core import Env
from agentic_rl.envs.task_data import load_env_tasks
from agentic_rl.envs.tool_use_tools import ToolFailure, to_number
from agentic_rl.envs.workflow_services import TOOL_ARGS, WRITE_TOOLS, Services, argument_problem
from agentic_rl.envs.workflow_tasks import generate_tasks, render_prompt, validate_task
from agentic_rl.tasks.core import Task, TaskSet

RENAMED_TOOLS = {"crm.find_customer": "people.search", "crm.get_customer": "people.get",
                 "crm.orders": "sales.list_orders", "crm.search_orders": "sales.find_orders",
                 "crm.cancel_order": "sales.cancel", "crm.delete_customer": "people.remove",
                 "billing.invoice": "payments.invoice", "billing.refund": "payments.refund", "mail.send": "email.send"}
_NOISE_BEFORE = ["[200 OK] ", "(cached) ", "Request done. "]
_NOISE_AFTER = [" -- end", " [trace ok]", " (page 1 of 1)"]


class WorkflowEnv(Env):
    description = "Cross-system workflow: orchestrate stateful mock CRM, billing and mail services"
    accepted_actions: ClassVar[tuple[str, ...]] = ("tool_call", "answer")
    perturbations: ClassVar[tuple[str, ...]] = (
        "paraphrase", "distractors", "reordered_results", "noisy_observation", "renamed_tools")
    task_validator = staticmethod(validate_task)

    def __init__(
        self,
        tasks: TaskSet | str | Path | None = None,
        *,
        split: str | None = "train",
        seed: int = 0,
        max_steps: int = 12,
        perturbation: str | None = None,
        step_cost: float = 0.02,
        subgoal_bonus: float = 0.1,
        harmful_penalty: float = -0.5,
        invalid_action_penalty: float = -0.1,
        max_observation_chars: int = 2048,
        render_mode: str | None = None,
    ):
        """``tasks``: a TaskSet, a JSONL path, or None to generate the default set from ``seed``.
        ``split`` picks the tasks the env draws from (None: all)."""
        super().__init__(None, invalid_action_penalty=invalid_action_penalty, perturbation=perturbation,
                         max_observation_chars=max_observation_chars, render_mode=render_mode)
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.tasks = load_env_tasks(tasks, split=split, generate=lambda: generate_tasks(seed),
                                    validate=validate_task)
        self.max_steps = max_steps
        self.step_cost, self.subgoal_bonus = float(step_cost), float(subgoal_bonus)
        self.harmful_penalty = float(harmful_penalty)
        low = min(self.harmful_penalty, self.invalid_action_penalty) - self.step_cost
        self.reward_range = (low, 1.0 + self.subgoal_bonus)
        renamed = perturbation == "renamed_tools"
        self.tool_names = {t: RENAMED_TOOLS[t] if renamed else t for t in TOOL_ARGS}
        self._canonical = {shown: t for t, shown in self.tool_names.items()}
        self._new_episode({"customers": [], "orders": []})

    def _new_episode(self, world: dict[str, Any]) -> None:
        style = self.perturbation if self.perturbation in ("distractors", "reordered_results") else ""
        self.services = Services(world, style)
        self._read_results: dict[str, str] = {}
        self._executed: set[str] = set()
        self._harmful: list[dict[str, Any]] = []
        self._reached: list[str] = []
        self._finished = False
        self._mistake: str | None = None
        self._plan: list[dict[str, Any]] = []
        self._expert_rng = random.Random(0)

    def system_prompt(self) -> str:
        tools = "; ".join(f"{self.tool_names[t]}({', '.join(args)})" for t, args in TOOL_ARGS.items())
        return (f"Tools: {tools}.\nCall a tool: <tool>{{\"name\": ..., \"arguments\": {{...}}}}</tool>\n"
                "Finish: <answer>done</answer>")

    def _reset(self, task: Task | None) -> tuple[str, dict]:
        assert task is not None
        self._new_episode(task.data["world"])
        self._expert_rng = random.Random(self.rng.getrandbits(64))
        prompt = task.prompt
        if self.perturbation == "paraphrase" and isinstance(task.data.get("q"), dict):
            prompt = render_prompt(task.data["family"], task.data["q"], paraphrase=True)
        return prompt, {"family": task.data["family"], "level": task.difficulty}

    # -- goal checking --------------------------------------------------------------------------
    def _subgoals(self) -> list[str]:
        """Names of the goal sub-states the services are in now."""
        assert self.task is not None
        goal, snap = self.task.data["goal"], self.services.snapshot()
        reached = [f"refund:{o}" for o, amount in goal.get("refunds", {}).items()
                   if abs(snap["refunded"].get(o, 0.0) - float(amount)) < 0.005]
        reached += [f"cancel:{o}" for o in goal.get("cancelled", []) if o in snap["cancelled"]]
        for i, mail in enumerate(goal.get("mails", [])):
            keyword = str(mail["keyword"]).lower()
            if any(m["to"].lower() == str(mail["to"]).lower()
                   and (keyword in m["subject"].lower() or keyword in m["body"].lower()) for m in snap["outbox"]):
                reached.append(f"mail:{i}")
        return reached

    def goal_met(self) -> bool:
        """The independent success check: the service state matches the goal and nothing harmful happened."""
        assert self.task is not None
        goal, snap = self.task.data["goal"], self.services.snapshot()
        refunds = {o: float(a) for o, a in goal.get("refunds", {}).items()}
        same_refunds = all(abs(snap["refunded"].get(o, 0.0) - refunds.get(o, 0.0)) < 0.005
                           for o in set(refunds) | set(snap["refunded"]))
        return (same_refunds and set(snap["cancelled"]) == set(goal.get("cancelled", []))
                and len([s for s in self._subgoals() if s.startswith("mail:")]) == len(goal.get("mails", []))
                and not self._harmful)

    def _harm(self, tool: str, arguments: dict[str, Any]) -> str:
        """Why this (about to run) write call is harmful, judged on the state before it; else ''."""
        assert self.task is not None
        goal = self.task.data["goal"]
        if tool == "crm.delete_customer":
            return "deleted a customer record"
        if tool == "crm.cancel_order" and arguments["order_id"].strip().upper() not in goal.get("cancelled", []):
            return "cancelled an order the goal keeps"
        if tool == "mail.send":
            targets = {str(m["to"]).lower() for m in goal.get("mails", [])}
            return "" if arguments["to"].strip().lower() in targets else "mailed someone the goal does not name"
        if tool == "billing.refund":
            order = arguments["order_id"].strip().upper()
            allowed = float(goal.get("refunds", {}).get(order, 0.0))
            after = self.services.refunded(order) + (to_number(arguments["amount"]) or 0.0)
            return "refunded more than the goal allows" if after > allowed + 0.005 else ""
        return ""

    # -- stepping -------------------------------------------------------------------------------
    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        if action.kind == "answer":
            self._finished = True
            success = self.goal_met()
            terms = {"outcome": 1.0 if success else 0.0}
            return "Finished.", terms["outcome"], True, False, {"success": success, "reward_terms": terms}
        tool = self._canonical.get(action.name)
        if tool is None:
            return self._invalid(f"unknown tool {action.name[:40]!r}; see the tool list", "unknown_tool")
        problem = argument_problem(tool, action.arguments)
        if problem:
            return self._invalid(problem, "bad_arguments")
        key = f"{tool}:{json.dumps(action.arguments, sort_keys=True)}"
        if tool not in WRITE_TOOLS and key in self._read_results:
            terms = {"step_cost": -self.step_cost}
            return self._end_step(f"Repeated call. {self._read_results[key]}", terms,
                                  {"error": "repeated_action", "tool": tool})
        harm = self._harm(tool, action.arguments) if tool in WRITE_TOOLS else ""
        try:
            observation = self.services.call(tool, action.arguments)
        except ToolFailure as exc:
            return self._invalid(str(exc), exc.kind)
        if self.perturbation == "noisy_observation":
            observation = self.rng.choice(_NOISE_BEFORE) + observation + self.rng.choice(_NOISE_AFTER)
        self._executed.add(key)
        if tool not in WRITE_TOOLS:
            self._read_results[key] = observation
        new = [s for s in self._subgoals() if s not in self._reached]
        self._reached += new
        terms = {"step_cost": -self.step_cost, "shaping/subgoal": self.subgoal_bonus * len(new)}
        info: dict[str, Any] = {"tool": tool}
        if harm:
            self._harmful.append({"step": self.steps, "tool": tool, "arguments": action.arguments, "why": harm})
            terms["harmful_action"] = self.harmful_penalty
            info["error"] = "harmful_action"
        return self._end_step(observation, terms, info)

    def _end_step(self, observation: str, terms: dict[str, float], info: dict) -> tuple[str, float, bool, bool, dict]:
        """Adds the outcome when the step budget ends the episode (success is judged from state then too)."""
        truncated = self.steps >= self.max_steps
        if truncated:
            info["success"] = self.goal_met()
            terms["outcome"] = 1.0 if info["success"] else 0.0
        info["reward_terms"] = terms
        return observation, sum(terms.values()), False, truncated, info

    def _invalid(self, message: str, error: str) -> tuple[str, float, bool, bool, dict]:
        observation, _, _, _, info = super()._invalid(message, error)
        return self._end_step(observation, dict(info["reward_terms"]), info)

    def _state(self) -> dict[str, Any]:
        return {
            "family": self.task.data.get("family") if self.task else None,
            "services": self.services.snapshot(),
            "harmful": [dict(h) for h in self._harmful],
            "subgoals_reached": list(self._reached),
            "finished": self._finished,
            "expert_mistake": self._mistake,
            "perturbation": self.perturbation,
        }

    # -- the scripted expert --------------------------------------------------------------------
    def expert_action(self, skill: float = 1.0) -> str:
        if self.task is None:
            raise RuntimeError("call reset() before expert_action()")
        if not 0.0 <= skill <= 1.0:
            raise ValueError(f"skill must be in [0, 1], got {skill}")
        if self._mistake is None:
            mistakes = self._applicable_mistakes()
            self._mistake = self._expert_rng.choice(mistakes) if self._expert_rng.random() >= skill else ""
            self._plan = self._plan_with(self._mistake)
        for call in self._plan:
            if f"{call['name']}:{json.dumps(call['arguments'], sort_keys=True)}" not in self._executed:
                return tool_call(self.tool_names[call["name"]], call["arguments"])
        return answer("done")

    def _applicable_mistakes(self) -> list[str]:
        assert self.task is not None
        family, plan = self.task.data["family"], self.task.data["plan"]
        if family == "notify":
            return ["guess_email"]
        mistakes = ["skip_notify"]
        if family == "item_refund":
            mistakes.append("full_refund")
        if any(call["name"] == "crm.cancel_order" for call in plan):
            mistakes.append("ignore_condition")
        return mistakes

    def _plan_with(self, mistake: str) -> list[dict[str, Any]]:
        """The task's plan, changed by ``mistake``."""
        assert self.task is not None
        plan = [{"name": c["name"], "arguments": dict(c["arguments"])} for c in self.task.data["plan"]]
        orders = {o["id"]: o for o in self.task.data["world"]["orders"]}
        if mistake == "skip_notify":
            kept = [c for c in plan if c["name"] != "mail.send"]
            return kept if len(kept) < len(plan) else plan[:-1]
        if mistake == "guess_email":
            names = {c["email"]: c["name"] for c in self.task.data["world"]["customers"]}
            plan = [c for c in plan if c["name"] not in ("crm.find_customer", "crm.get_customer")]
            for c in plan:
                if c["name"] == "mail.send":
                    guess = names.get(c["arguments"]["to"], "customer").lower().replace(" ", ".") + "@mail.test"
                    c["arguments"]["to"] = guess
        for c in plan:
            if mistake == "full_refund" and c["name"] == "billing.refund":
                c["arguments"]["amount"] = sum(i["price"] for i in orders[c["arguments"]["order_id"]]["items"])
            if mistake == "ignore_condition" and c["name"] == "crm.cancel_order":
                order = orders[c["arguments"]["order_id"]]
                item = (self.task.data.get("q") or {}).get("item")
                price = next((i["price"] for i in order["items"] if i["name"] == item), order["items"][0]["price"])
                c["name"], c["arguments"] = "billing.refund", {"order_id": order["id"], "amount": price}
        return plan


def random_action(env: WorkflowEnv, rng: random.Random) -> str:
    """A random well-formed action: any tool, arguments drawn from the world's ids/emails or junk, or finish."""
    assert env.task is not None
    world = env.task.data["world"]
    ids = [c["id"] for c in world["customers"]] + [o["id"] for o in world["orders"]] + ["X1", "lamp"]
    emails = [c["email"] for c in world["customers"]] + ["someone@mail.test"]
    if rng.random() < 0.1:
        return answer("done")
    tool = rng.choice(list(TOOL_ARGS))
    arguments: dict[str, Any] = {}
    for name in TOOL_ARGS[tool]:
        if name == "name|email":
            arguments["email"] = rng.choice(emails)
        elif name == "to":
            arguments[name] = rng.choice(emails)
        elif name == "amount":
            arguments[name] = rng.randint(1, 300)
        else:
            arguments[name] = rng.choice(ids + ["refund", "hello"])
    return tool_call(env.tool_names[tool], arguments)
