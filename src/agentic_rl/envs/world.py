"""``world-v0``: a partially observable grid world in text — find the key, open the door, reach the goal.

The agent sees only the cells within ``view_radius`` of itself (a tiny character grid plus a one-line
legend), so it must explore. Commands (inside ``<action>...</action>``): ``go north|south|east|west``,
``pick up key`` (standing on the key), ``open door`` (next to the door, holding the key).
``info["admissible_actions"]`` lists the exact texts that do something; anything else (walking into a
wall, opening without the key, garbage) is an ``invalid_action`` with the penalty, and the episode goes on.

Reward terms (``info["reward_terms"]``, they sum to the reward):

- ``outcome``: +1 when the agent steps onto the goal (``success``; the episode terminates);
- ``step_cost``: −``step_cost`` per valid step; ``invalid_action``: the penalty instead;
- ``subgoal/key``, ``subgoal/door``: +``subgoal_reward`` the *first* time the key is picked up / the door
  is opened (once per episode, so they cannot be farmed);
- ``shaping/potential`` (only with ``shaping="potential"``): ``γ·Φ(s') − Φ(s)`` with
  ``Φ(s) = −scale · L(s) / L(s₀)``, where ``L`` is the length of the shortest remaining plan (the BFS
  distance to the current sub-goal plus the remaining legs key → door → goal). Potential-based shaping
  leaves the optimal policy unchanged (Ng et al., 1999); with the default ``γ = 1`` it telescopes, so
  an episode's shaping sums to ``scale · (L(s₀) − L(s_T)) / L(s₀)`` and loops earn exactly nothing.

Tasks: :func:`generate_tasks` — levels 0/1/2 are 5×5, 7×7 and 9×9 rooms (the larger with scattered
walls, the key out of sight at the start). Task ``data``: ``grid`` (list of strings over ``# . S K D G``),
optional ``max_steps`` and ``view_radius``. Train and test splits share no layout.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from agentic_rl.agent.actions import Action, command
from agentic_rl.env.core import Env
from agentic_rl.envs.task_data import load_env_tasks
from agentic_rl.envs.world_maps import (
    DIRECTIONS,
    LEVELS,
    Layout,
    State,
    generate_layout,
    is_adjacent,
    parse_layout,
    plan,
    start_state,
)
from agentic_rl.tasks.core import Task, TaskFileError, TaskSet

PROMPTS = (
    "Find the key, pick it up, open the locked door and reach the goal. You only see the cells around you.",
    "Somewhere here is a {key}. Take it, unlock the {door} with it and walk to the {goal}. Your view is limited.",
    "Your mission: get the {key}, use it on the {door}, then step onto the {goal}. Explore to find them.",
)
_PLAIN = {"key": "key", "door": "door", "goal": "goal", "coin": "coin",
          "glyphs": {"you": "@", "wall": "#", "floor": ".", "key": "K", "door": "D", "open": "/", "goal": "G",
                     "coin": "$", "unseen": "?"}}
_RENAMED = {"key": "card", "door": "gate", "goal": "exit", "coin": "pebble",
            "glyphs": {"you": "A", "wall": "X", "floor": "_", "key": "c", "door": "=", "open": "-", "goal": "E",
                       "coin": "o", "unseen": "?"}}
_NOISE_RATE = 0.2


def _validate(task: Task, where: str) -> None:
    parse_layout(task.data.get("grid"), where)
    for name, low in (("max_steps", 1), ("view_radius", 1)):
        value = task.data.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
            raise TaskFileError(f"{where}: field 'data.{name}' must be an integer >= {low}, got {value!r}")


@lru_cache(maxsize=8)
def generate_tasks(seed: int = 0, train_per_level: int = 40, test_per_level: int = 20) -> TaskSet:
    """The default task set: for each level in :data:`LEVELS`, ``train_per_level`` + ``test_per_level``
    distinct random layouts (no layout appears twice, so train and test share none). Deterministic in
    ``seed``. Step budget per task: twice the shortest plan plus 8."""
    rng = random.Random(f"world-v0:{seed}")
    tasks: list[Task] = []
    seen: set[str] = set()
    for level, (side, _, view, _) in LEVELS.items():
        made = 0
        while made < train_per_level + test_per_level:
            grid = generate_layout(rng, level)
            if grid is None or "".join(grid) in seen:
                continue
            seen.add("".join(grid))
            split = "train" if made < train_per_level else "test"
            index = made if split == "train" else made - train_per_level
            layout = parse_layout(grid, "generated")
            optimal = plan(layout, start_state(layout))[1]
            assert optimal is not None
            data = {"grid": grid, "max_steps": 2 * optimal + 8, "view_radius": view, "optimal_steps": optimal}
            tasks.append(Task(f"world-L{level}-{split}-{index:03d}", PROMPTS[0], data, level, split, "world-v0",
                              (f"{side}x{side}",)))
            made += 1
    return TaskSet(tasks, name=f"world-v0-seed{seed}")


class GridWorldEnv(Env):
    """Partially observable key–door–goal grid world (see the module docstring for rewards and tasks)."""

    description = "Partially observable grid world: explore, find the key, open the door, reach the goal"
    accepted_actions: ClassVar[tuple[str, ...]] = ("command", "answer")
    perturbations: ClassVar[tuple[str, ...]] = ("noisy_observation", "renamed_labels", "distractors", "paraphrase")
    task_validator = staticmethod(_validate)
    reward_range = (-1.0, 1.5)

    def __init__(self, tasks: TaskSet | str | Path | None = None, *, split: str | None = "train", seed: int = 0,
                 max_steps: int | None = None, perturbation: str | None = None, shaping: str | None = None,
                 shaping_scale: float = 0.2, shaping_gamma: float = 1.0, step_cost: float = 0.01,
                 subgoal_reward: float = 0.1, invalid_action_penalty: float = -0.1, render_mode: str | None = None):
        """``tasks``: a TaskSet, a JSONL path, or None to generate the default set from ``seed``; ``split``
        None keeps every split. ``max_steps`` overrides each task's ``data.max_steps``. ``shaping``:
        None or ``"potential"`` (see the module docstring for ``shaping_scale`` and ``shaping_gamma``)."""
        if shaping not in (None, "potential"):
            raise ValueError(f"shaping must be None or 'potential', got {shaping!r}")
        if not 0.0 < shaping_gamma <= 1.0:
            raise ValueError(f"shaping_gamma must be in (0, 1], got {shaping_gamma}")
        taskset = load_env_tasks(tasks, split=split, generate=lambda: generate_tasks(seed), validate=_validate)
        super().__init__(taskset, invalid_action_penalty=invalid_action_penalty, perturbation=perturbation,
                         render_mode=render_mode)
        self.max_steps_override = max_steps
        self.shaping, self.shaping_scale, self.shaping_gamma = shaping, shaping_scale, shaping_gamma
        self.step_cost, self.subgoal_reward = step_cost, subgoal_reward
        self.labels = _RENAMED if perturbation == "renamed_labels" else _PLAIN
        self.layout: Layout | None = None

    # -- episode ------------------------------------------------------------------------------
    def _reset(self, task: Task | None) -> tuple[str, dict]:
        assert task is not None
        self.layout = parse_layout(task.data.get("grid"), task.id)
        # the env's own randomness (noise, distractors) has its own stream, so consulting the expert
        # (which draws from self.rng) never changes what the env shows
        self.world_rng = random.Random(self.rng.getrandbits(64))
        self.view_radius = int(task.data.get("view_radius", 2))
        self.max_steps = self.max_steps_override or int(task.data.get("max_steps", 100))
        self.pos, self.has_key, self.door_open, self.done = self.layout.start, False, False, False
        self.rewarded: set[str] = set()
        self.coins: set[tuple[int, int]] = set()
        if self.perturbation == "distractors":
            free = [(r, c) for r in range(self.layout.rows) for c in range(self.layout.cols)
                    if self.layout.passable((r, c), True) and (r, c) not in
                    {self.layout.start, self.layout.key, self.layout.door, self.layout.goal}]
            self.coins = set(self.world_rng.sample(free, min(len(free), self.world_rng.randint(2, 4))))
        self.initial_plan = plan(self.layout, self._aug())[1] or 1
        prompt = task.prompt
        if self.perturbation == "paraphrase":
            prompt = self.world_rng.choice(PROMPTS[1:]).format(**self.labels)
        elif self.perturbation == "renamed_labels":
            prompt = PROMPTS[1].format(**self.labels)
        observation = f"{prompt}\n{self._view()}"
        return observation, {"admissible_actions": self._admissible()}

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        if self.done:
            return "The episode is over; call reset().", 0.0, True, False, {"success": self._at_goal(),
                                                                              "reward_terms": {}}
        if action.kind != "command":
            return self._invalid("this task is solved by moving, not by answering. Use <action>...</action>.",
                                 "invalid_action")
        text = " ".join(action.text.lower().split())
        effects = self._effects()
        if text not in effects:
            return self._invalid(self._why_not(text), "invalid_action")
        before = self._aug()
        message = effects[text]()
        terms = {"step_cost": -self.step_cost}
        for goal_name in ("key", "door"):
            if self._subgoal_done(goal_name) and goal_name not in self.rewarded:
                self.rewarded.add(goal_name)
                terms[f"subgoal/{goal_name}"] = self.subgoal_reward
        if self._at_goal():
            self.done = True
            terms["outcome"] = 1.0
            message += f" You reached the {self.labels['goal']}!"
        return self._finish(message, terms, before)

    def _invalid(self, message: str, error: str) -> tuple[str, float, bool, bool, dict]:
        observation, reward, _, _, info = super()._invalid(message, error)
        terms = dict(info["reward_terms"])
        observation, reward, terminated, truncated, extra = self._finish(observation, terms, self._aug())
        info.update(extra, reward_terms=terms)
        return observation, reward, terminated, truncated, info

    def _finish(self, message: str, terms: dict[str, float], before: State) -> tuple[str, float, bool, bool, dict]:
        if self.shaping == "potential":
            terms["shaping/potential"] = self.shaping_gamma * self._potential(self._aug()) - self._potential(before)
        truncated = not self.done and self.steps >= self.max_steps
        if truncated:
            message += " Out of steps."
        info = {"success": self._at_goal(), "reward_terms": terms, "admissible_actions": self._admissible()}
        return f"{message}\n{self._view()}", float(sum(terms.values())), self.done, truncated, info

    def _state(self) -> dict[str, Any]:
        if self.layout is None:
            return {}
        return {"pos": list(self.pos), "has_key": self.has_key, "door_open": self.door_open, "done": self.done,
                "coins": sorted(list(c) for c in self.coins), "rewarded": sorted(self.rewarded),
                "max_steps": self.max_steps}

    # -- rules --------------------------------------------------------------------------------
    def _effects(self) -> dict[str, Any]:
        """Admissible command text → a function applying it and returning the message."""
        assert self.layout is not None
        out: dict[str, Any] = {}
        for name, (dr, dc) in DIRECTIONS.items():
            nxt = (self.pos[0] + dr, self.pos[1] + dc)
            if self.layout.passable(nxt, self.door_open):
                out[f"go {name}"] = lambda nxt=nxt, name=name: self._move(nxt, name)
        key, door, coin = self.labels["key"], self.labels["door"], self.labels["coin"]
        if not self.has_key and self.pos == self.layout.key:
            out[f"pick up {key}"] = lambda: self._set("has_key", f"You pick up the {key}.")
        if self.pos in self.coins:
            out[f"pick up {coin}"] = lambda: self._take_coin(coin)
        if self.has_key and not self.door_open and is_adjacent(self.pos, self.layout.door):
            out[f"open {door}"] = lambda: self._set("door_open", f"You unlock the {door}; it swings open.")
        return out

    def _move(self, nxt: tuple[int, int], name: str) -> str:
        self.pos = nxt
        return f"You go {name}."

    def _set(self, attribute: str, message: str) -> str:
        setattr(self, attribute, True)
        return message

    def _take_coin(self, coin: str) -> str:
        self.coins.discard(self.pos)
        return f"You pick up a {coin}. It is of no use here."

    def _why_not(self, text: str) -> str:
        assert self.layout is not None
        key, door = self.labels["key"], self.labels["door"]
        if text.startswith("go ") and text[3:] in DIRECTIONS:
            dr, dc = DIRECTIONS[text[3:]]
            if (self.pos[0] + dr, self.pos[1] + dc) == self.layout.door and not self.door_open:
                return f"the {door} is locked."
            return "you bump into a wall."
        if text == f"open {door}":
            return f"you need the {key} first." if not self.has_key else f"there is no closed {door} next to you."
        if text.startswith("pick up"):
            return "there is nothing like that here to pick up."
        return f"unknown command {text[:40]!r}. Try one of: " + ", ".join(self._effects())

    def _subgoal_done(self, name: str) -> bool:
        return self.has_key if name == "key" else self.door_open

    def _at_goal(self) -> bool:
        return self.layout is not None and self.pos == self.layout.goal

    def _aug(self) -> State:
        return (*self.pos, self.has_key, self.door_open)

    def _potential(self, state: State) -> float:
        assert self.layout is not None
        remaining = plan(self.layout, state)[1]
        return -self.shaping_scale * (remaining if remaining is not None else self.initial_plan) / self.initial_plan

    def _admissible(self) -> list[str]:
        return [command(text) for text in self._effects()]

    # -- rendering ----------------------------------------------------------------------------
    def _view(self) -> str:
        """The neighbourhood as a character grid (north up), a legend and the inventory line."""
        assert self.layout is not None
        g, radius = self.labels["glyphs"], self.view_radius
        special = {self.layout.key: "key", self.layout.goal: "goal"}
        if self.has_key:
            special.pop(self.layout.key)
        rows = []
        for r in range(self.pos[0] - radius, self.pos[0] + radius + 1):
            row = []
            for c in range(self.pos[1] - radius, self.pos[1] + radius + 1):
                cell = (r, c)
                if cell == self.pos:
                    glyph = g["you"]
                elif cell == self.layout.door:
                    glyph = g["open"] if self.door_open else g["door"]
                elif cell in special:
                    glyph = g[special[cell]]
                elif cell in self.coins:
                    glyph = g["coin"]
                else:
                    glyph = g["floor"] if self.layout.passable(cell, True) else g["wall"]
                    if self.perturbation == "noisy_observation" and self.world_rng.random() < _NOISE_RATE:
                        glyph = g["unseen"]
                row.append(glyph)
            rows.append("".join(row))
        return "\n".join(rows) + "\n" + self._legend() + f"\nCarrying: {self._inventory()}. " + \
            f"Steps left: {max(self.max_steps - self.steps, 0)}."

    def _legend(self) -> str:
        g, lab = self.labels["glyphs"], self.labels
        parts = [f"{g['you']} you", f"{g['wall']} wall", f"{g['floor']} floor", f"{g['key']} {lab['key']}",
                 f"{g['door']} locked {lab['door']}", f"{g['open']} open {lab['door']}", f"{g['goal']} {lab['goal']}"]
        if self.coins:
            parts.append(f"{g['coin']} {lab['coin']}")
        if self.perturbation == "noisy_observation":
            parts.append(f"{g['unseen']} unclear")
        return "Legend: " + ", ".join(parts) + " (north is up)"

    def _inventory(self) -> str:
        return f"the {self.labels['key']}" if self.has_key else "nothing"

    def system_prompt(self) -> str:
        key, door = self.labels["key"], self.labels["door"]
        return ("You are exploring a grid world and see only the cells near you. Act with exactly one command "
                f"per turn inside <action>...</action>: go north, go south, go east, go west, pick up {key}, "
                f"open {door}. Example: <action>go north</action>")

    # -- expert -------------------------------------------------------------------------------
    def expert_action(self, skill: float = 1.0) -> str:
        """Follows a shortest plan on the full map (privileged). With probability ``1 - skill`` per step it
        wanders instead: a random direction (possibly into a wall), which also makes it walk past the key."""
        assert self.layout is not None, "call reset() first"
        if self.rng.random() >= skill:
            return command(f"go {self.rng.choice(list(DIRECTIONS))}")
        word, _ = plan(self.layout, self._aug())
        if word is None:
            return command("go north")
        word = word.replace("key", self.labels["key"]).replace("door", self.labels["door"])
        return command(word)
