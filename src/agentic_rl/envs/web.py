"""``web-v0``: a generated shop website rendered as compact text (WebShop-style).

Pages: *home* (department links), *results* (≤5 products per page, ``next``/``prev``), *product* (all
attributes, a ``buy`` button on buy tasks). Commands, inside ``<action>...</action>``: ``search <words>``
(from any page), ``click <n>``, ``next``, ``prev``, ``back``, ``buy``; fact tasks end with
``<answer>...</answer>``. ``info["admissible_actions"]`` lists the exact enumerable texts on the current
page; ``info["action_templates"]`` adds the open-ended ones (``search <words>``, the answer).

Reward terms (``info["reward_terms"]``, summing to the reward):

- ``outcome``: on ``buy``, the fraction of the task's checks the bought product passes (each constraint
  such as colour or price bound, plus "cheapest"/"best-rated" if asked); on ``<answer>``, 1 if right else 0.
  ``success`` = every check passed / the answer is right. Either ends the episode.
- ``step_cost``: −``step_cost`` per valid step. ``invalid_action``: the penalty instead (unknown command,
  a link number not on the page, ``buy`` on a non-product page, ...).
- ``subgoal/found``: +``found_reward`` the first time the page of a product that passes every check is
  opened (once per episode: browsing earns nothing more).

Tasks: :func:`generate_tasks` (buy and fact tasks at levels 0–2, see
:func:`agentic_rl.envs.web_site.generate_task_data`); the test split uses product categories the train
split never shows. Task ``data`` format: :mod:`agentic_rl.envs.web_site`.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from agentic_rl.agent.actions import Action, answer, command
from agentic_rl.env.core import Env
from agentic_rl.envs import web_site as site
from agentic_rl.envs.task_data import load_env_tasks
from agentic_rl.tasks.core import Task, TaskSet

PER_PAGE = 5
_PLAIN = {"search": "search", "click": "click", "next": "next", "prev": "prev", "back": "back", "buy": "buy"}
_RENAMED = {"search": "find", "click": "open", "next": "more", "prev": "previous", "back": "return",
            "buy": "purchase"}
_BANNERS = ("Free shipping on orders over $50!", "Sale ends tonight.", "New arrivals every Monday.",
            "Sign up for our newsletter.", "Gift cards available.")
_TAGS = (" (bestseller)", " (new)", " (limited)", " (staff pick)")


def _validate(task: Task, where: str) -> None:
    site.validate_data(task.data, where)


@lru_cache(maxsize=8)
def generate_tasks(seed: int = 0, train_per_level: int = 40, test_per_level: int = 20) -> TaskSet:
    """The default task set: per level (0, 1, 2) and split, half buy and half fact tasks, each with its
    own generated catalogue. Test tasks use only test categories (unseen in training). Deterministic."""
    rng = random.Random(f"web-v0:{seed}")
    tasks = []
    for level in (0, 1, 2):
        for split, count in (("train", train_per_level), ("test", test_per_level)):
            for i in range(count):
                kind = "buy" if i % 2 == 0 else "fact"
                data = site.generate_task_data(rng, level, kind, site.SPLIT_CATEGORIES[split])
                site.validate_data(data, f"generated web task L{level} {split} {i}")
                tasks.append(Task(f"web-L{level}-{split}-{i:03d}", site.prompt(data), data, level, split,
                                  "web-v0", (kind,)))
    return TaskSet(tasks, name=f"web-v0-seed{seed}")


class WebShopEnv(Env):
    """Shop website in text; buy the item matching the constraints or report a fact about one."""

    description = "Generated shop website as text: search, browse, pick the item matching constraints or extract a fact"
    accepted_actions: ClassVar[tuple[str, ...]] = ("command", "answer")
    perturbations: ClassVar[tuple[str, ...]] = (
        "paraphrase", "reordered_results", "distractors", "renamed_labels", "noisy_observation")
    task_validator = staticmethod(_validate)
    reward_range = (-1.0, 1.0)

    def __init__(self, tasks: TaskSet | str | Path | None = None, *, split: str | None = "train", seed: int = 0,
                 max_steps: int | None = None, perturbation: str | None = None, step_cost: float = 0.01,
                 found_reward: float = 0.05, invalid_action_penalty: float = -0.1,
                 render_mode: str | None = None):
        """``tasks``: a TaskSet, a JSONL path or None (generate from ``seed``); ``split`` None keeps all.
        ``max_steps`` overrides each task's ``data.max_steps``."""
        taskset = load_env_tasks(tasks, split=split, generate=lambda: generate_tasks(seed), validate=_validate)
        super().__init__(taskset, invalid_action_penalty=invalid_action_penalty, perturbation=perturbation,
                         render_mode=render_mode)
        self.max_steps_override = max_steps
        self.step_cost, self.found_reward = step_cost, found_reward
        self.labels = _RENAMED if perturbation == "renamed_labels" else _PLAIN
        self.data: dict[str, Any] = {}

    # -- episode ------------------------------------------------------------------------------
    def _reset(self, task: Task | None) -> tuple[str, dict]:
        assert task is not None
        self.data = {**task.data, "products": [dict(p) for p in task.data["products"]]}
        # the site's own randomness has its own stream: consulting the expert (self.rng) changes nothing
        self.site_rng = random.Random(self.rng.getrandbits(64))
        if self.perturbation == "distractors":
            self._add_distractors()
        self.products = {p["id"]: p for p in self.data["products"]}
        self.target_ids = {p["id"] for p in site.targets(self.data)}
        self.max_steps = self.max_steps_override or int(self.data.get("max_steps", 20))
        self.prompt = task.prompt
        if self.perturbation == "paraphrase":
            self.prompt = site.prompt(self.data, self.site_rng.choice((1, 2)))
        self.history: list[dict[str, Any]] = []
        self.page: dict[str, Any] = {"kind": "home"}
        self.found = self.done = self.succeeded = False
        self.bought: str | None = None
        return self._render(""), self._info()

    def _add_distractors(self) -> None:
        """3–5 near-miss products (each fails exactly one check) at random places in the catalogue."""
        products = self.data["products"]
        base = site.targets(self.data)[0]
        keys = [k for k in self.data["constraints"] if k != "category"] or ["colour"]
        for i in range(self.site_rng.randint(3, 5)):
            extra = site.near_miss(self.site_rng, base, keys, keys, self.data)
            extra["id"] = f"x{i + 1:02d}"
            products.insert(self.site_rng.randrange(len(products) + 1), extra)
        # each distractor fails one constraint, so the set of right products is unchanged
        assert all(p["id"][0] == "p" for p in site.targets(self.data))

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        if self.done:
            return "The episode is over; call reset().", 0.0, True, False, self._info(reward_terms={})
        if action.kind == "answer":
            if self.data["kind"] != "fact":
                return self._invalid(f"this task asks you to {self.labels['buy']} an item, not to answer.",
                                     "invalid_action")
            return self._end(self._answer(action.text))
        text = " ".join(action.text.split())
        lowered = text.lower()
        search_word = self.labels["search"] + " "
        if lowered.startswith(search_word) and lowered[len(search_word):].strip():
            return self._move(self._search_page(text[len(search_word):].strip()))
        handler = self._handlers().get(lowered)
        if handler is None:
            return self._invalid(self._why_not(lowered), "invalid_action")
        return handler()

    def _invalid(self, message: str, error: str) -> tuple[str, float, bool, bool, dict]:
        observation, reward, _, _, info = super()._invalid(message, error)
        info.update(self._info(reward_terms=info["reward_terms"]))
        truncated = not self.done and self.steps >= self.max_steps
        return self._render(observation), reward, self.done, truncated, info

    def _state(self) -> dict[str, Any]:
        if not self.data:
            return {}
        return {"page": dict(self.page), "history_depth": len(self.history), "found": self.found,
                "bought": self.bought, "done": self.done, "max_steps": self.max_steps}

    # -- commands -----------------------------------------------------------------------------
    def _handlers(self) -> dict[str, Any]:
        """Admissible enumerable command text (lower case) → the function that performs it."""
        lab, page, out = self.labels, self.page, {}
        for n, link in enumerate(self._links(), 1):
            out[f"{lab['click']} {n}"] = lambda link=link: self._move(link)
        if page["kind"] == "results":
            if page["page"] + 1 < self._page_count():
                out[lab["next"]] = lambda: self._turn_page(+1)
            if page["page"] > 0:
                out[lab["prev"]] = lambda: self._turn_page(-1)
        if self.history:
            out[lab["back"]] = self._back
        if page["kind"] == "product" and self.data["kind"] == "buy":
            out[lab["buy"]] = self._buy
        return out

    def _links(self) -> list[dict[str, Any]]:
        page = self.page
        if page["kind"] == "home":
            return [self._results_page(f"Department: {site.CATEGORIES[c][0]}", [
                p["id"] for p in self.data["products"] if p["category"] == c]) for c in self._departments()]
        if page["kind"] == "results":
            start = page["page"] * PER_PAGE
            return [{"kind": "product", "id": pid} for pid in page["items"][start:start + PER_PAGE]]
        return []

    def _departments(self) -> list[str]:
        return list(dict.fromkeys(p["category"] for p in self.data["products"]))

    def _search_page(self, query: str) -> dict[str, Any]:
        return self._results_page(f'Results for "{query[:40]}"',
                                  [p["id"] for p in site.search(self.data["products"], query)])

    def _results_page(self, heading: str, items: list[str]) -> dict[str, Any]:
        if self.perturbation == "reordered_results":
            items = list(items)
            random.Random(f"{heading}:{self.task.id if self.task else ''}:{len(items)}").shuffle(items)
        return {"kind": "results", "heading": heading, "items": items, "page": 0}

    def _move(self, page: dict[str, Any]) -> tuple[str, float, bool, bool, dict]:
        self.history.append(self.page)
        self.page = dict(page)
        return self._valid_step("")

    def _turn_page(self, delta: int) -> tuple[str, float, bool, bool, dict]:
        self.page = {**self.page, "page": self.page["page"] + delta}
        return self._valid_step("")

    def _back(self) -> tuple[str, float, bool, bool, dict]:
        self.page = self.history.pop()
        return self._valid_step("")

    def _buy(self) -> tuple[str, float, bool, bool, dict]:
        product = self.products[self.page["id"]]
        self.bought = product["id"]
        passed = site.checks(product, self.data)
        missed = [name for name, ok in passed.items() if not ok]
        self.succeeded = not missed
        note = "It matches every requirement." if not missed else f"It does not match: {', '.join(missed)}."
        return self._end((sum(passed.values()) / len(passed), f"You bought the {site.title(product)}. {note}"))

    def _answer(self, text: str) -> tuple[float, str]:
        expected = site.field_text(self.products[next(iter(self.target_ids))], self.data["field"])
        self.succeeded = site.answer_matches(text, expected)
        return float(self.succeeded), "Your answer is correct." if self.succeeded else "Your answer is wrong."

    def _end(self, result: tuple[float, str]) -> tuple[str, float, bool, bool, dict]:
        outcome, message = result
        self.done = True
        terms = {"step_cost": -self.step_cost, "outcome": outcome}
        return f"{message} The episode is over.", sum(terms.values()), True, False, self._info(reward_terms=terms)

    def _valid_step(self, message: str) -> tuple[str, float, bool, bool, dict]:
        terms = {"step_cost": -self.step_cost}
        if self.page["kind"] == "product" and self.page["id"] in self.target_ids and not self.found:
            self.found = True
            terms["subgoal/found"] = self.found_reward
        truncated = self.steps >= self.max_steps
        observation = self._render(message) + ("\nOut of steps." if truncated else "")
        return observation, sum(terms.values()), False, truncated, self._info(reward_terms=terms)

    def _why_not(self, text: str) -> str:
        lab = self.labels
        if text.startswith(lab["click"] + " "):
            return f"there is no link [{text[len(lab['click']) + 1:][:10]}] on this page."
        if text == lab["buy"]:
            return "open a product page first." if self.data["kind"] == "buy" else "this task asks for an answer."
        if text in (lab["next"], lab["prev"], lab["back"]):
            return f"'{text}' is not available on this page."
        return f"unknown command {text[:40]!r}. Available: " + ", ".join(self._admissible_texts())

    def _page_count(self) -> int:
        return max(1, -(-len(self.page["items"]) // PER_PAGE))

    # -- observation --------------------------------------------------------------------------
    def _admissible_texts(self) -> list[str]:
        return list(self._handlers())

    def _info(self, **extra: Any) -> dict[str, Any]:
        templates = [command(f"{self.labels['search']} <words>")]
        if self.data.get("kind") == "fact":
            templates.append(answer("<value>"))
        return {"success": self.succeeded, "admissible_actions": [command(t) for t in self._admissible_texts()],
                "action_templates": templates, **extra}

    def _render(self, message: str) -> str:
        lines = [f"Task: {self.prompt}"]
        if message:
            lines.append(message)
        if self.perturbation == "noisy_observation":
            lines.append(self.site_rng.choice(_BANNERS))
        lines += self._page_lines()
        buttons = [t for t in self._admissible_texts() if not t.startswith(self.labels["click"] + " ")]
        lines.append(f"Buttons: {', '.join(buttons + [self.labels['search'] + ' <words>'])}")
        return "\n".join(lines)

    def _page_lines(self) -> list[str]:
        page, links = self.page, self._links()
        if page["kind"] == "home":
            return ["== Home ==", "Departments: " + "  ".join(
                f"[{n}] {link['heading'].split(': ')[1].capitalize()}" for n, link in enumerate(links, 1))]
        if page["kind"] == "results":
            total = len(page["items"])
            lines = [f"== {page['heading']} (page {page['page'] + 1}/{self._page_count()}, {total} items) =="]
            for n, link in enumerate(links, 1):
                product = self.products[link["id"]]
                tag = self.site_rng.choice(_TAGS) if self.perturbation == "noisy_observation" and \
                    self.site_rng.random() < 0.3 else ""
                lines.append(f"[{n}] {site.title(product)} - ${product['price']:.2f}{tag}")
            return lines if total else lines + ["No products found. Try other words."]
        p = self.products[page["id"]]
        return [f"== {site.title(p)} ==", f"Price ${p['price']:.2f} | colour {p['colour']} | material "
                f"{p['material']} | size {p['size']} | brand {p['brand']} | rating {p['rating']}/5"]

    def system_prompt(self) -> str:
        lab = self.labels
        return ("You are shopping on a text website. Act with one command per turn inside <action>...</action>: "
                f"{lab['search']} <words>, {lab['click']} <n>, {lab['next']}, {lab['prev']}, {lab['back']}, "
                f"{lab['buy']}. For questions, reply <answer>...</answer>. "
                f"Example: <action>{lab['search']} red cotton hat</action>")

    # -- expert -------------------------------------------------------------------------------
    def expert_action(self, skill: float = 1.0) -> str:
        """Privileged expert: searches the task's words, pages to the right product, opens it, then buys it
        or answers from it. With probability ``1 - skill`` per step it guesses instead: clicks a random
        result, or buys / answers from whatever product page it is on."""
        assert self.data, "call reset() first"
        lab, page = self.labels, self.page
        goal_id = sorted(self.target_ids)[0]
        if self.rng.random() >= skill:
            if page["kind"] == "product":
                return self._finish_on(page["id"])
            links = self._links()
            if page["kind"] == "results" and links:
                return command(f"{lab['click']} {self.rng.randrange(len(links)) + 1}")
        if page["kind"] == "product":
            return self._finish_on(page["id"]) if page["id"] in self.target_ids else command(lab["back"])
        if page["kind"] == "results" and goal_id in page["items"]:
            index = page["items"].index(goal_id)
            want = index // PER_PAGE
            if want != page["page"]:
                return command(lab["next"] if want > page["page"] else lab["prev"])
            return command(f"{lab['click']} {index % PER_PAGE + 1}")
        return command(f"{lab['search']} {site.canonical_query(self.data)}")

    def _finish_on(self, product_id: str) -> str:
        if self.data["kind"] == "buy":
            return command(self.labels["buy"])
        return answer(site.field_text(self.products[product_id], self.data["field"]))
