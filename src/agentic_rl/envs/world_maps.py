"""Layouts for ``world-v0``: generation, validation and shortest plans (privileged, used by the expert).

A layout is a list of equal-length strings over ``# . S K D G`` (wall, floor, start, key, locked door,
goal). It is solvable when the key is reachable from the start with the door closed, a floor cell
next to the door is reachable from the key, and the goal is reachable once the door is open.

Plans are searched over the *augmented* state ``(row, col, has_key, door_open)`` so that "pick up key"
and "open door" are steps like moves; :func:`plan` returns the first action of a shortest plan and
its length, which the expert follows and potential-based shaping uses as its distance.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from agentic_rl.tasks.core import TaskFileError

WALL, FLOOR, START, KEY, DOOR, GOAL = "#", ".", "S", "K", "D", "G"
DIRECTIONS: dict[str, tuple[int, int]] = {"north": (-1, 0), "south": (1, 0), "east": (0, 1), "west": (0, -1)}
#: Difficulty level → (interior side length, number of extra wall cells, view radius, key hidden at start).
LEVELS: dict[int, tuple[int, int, int, bool]] = {0: (5, 0, 2, False), 1: (7, 4, 2, True), 2: (9, 12, 2, True)}

Pos = tuple[int, int]
State = tuple[int, int, bool, bool]


@dataclass(frozen=True)
class Layout:
    """A parsed, validated layout. ``walls`` excludes the door (the door blocks only while closed)."""

    rows: int
    cols: int
    walls: frozenset[Pos]
    start: Pos
    key: Pos
    door: Pos
    goal: Pos

    def passable(self, pos: Pos, door_open: bool) -> bool:
        r, c = pos
        if not (0 <= r < self.rows and 0 <= c < self.cols) or pos in self.walls:
            return False
        return door_open or pos != self.door


def parse_layout(grid: object, where: str) -> Layout:
    """Validate ``grid`` (the ``data.grid`` field of a task); errors name ``where`` and the problem."""
    if not isinstance(grid, list) or not grid or not all(isinstance(row, str) and row for row in grid):
        raise TaskFileError(f"{where}: field 'data.grid' must be a non-empty list of non-empty strings")
    cols = len(grid[0])
    if any(len(row) != cols for row in grid):
        raise TaskFileError(f"{where}: field 'data.grid' rows must all have length {cols}")
    found: dict[str, list[Pos]] = {ch: [] for ch in (START, KEY, DOOR, GOAL)}
    walls = set()
    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            if ch == WALL:
                walls.add((r, c))
            elif ch in found:
                found[ch].append((r, c))
            elif ch != FLOOR:
                raise TaskFileError(f"{where}: field 'data.grid' has unknown cell {ch!r} at row {r}, column {c}")
    for ch, cells in found.items():
        if len(cells) != 1:
            raise TaskFileError(f"{where}: field 'data.grid' needs exactly one {ch!r}, found {len(cells)}")
    layout = Layout(len(grid), cols, frozenset(walls), found[START][0], found[KEY][0], found[DOOR][0], found[GOAL][0])
    if shortest_plan_length(layout, start_state(layout)) is None:
        raise TaskFileError(f"{where}: field 'data.grid' is not solvable (start → key → door → goal)")
    return layout


def start_state(layout: Layout) -> State:
    return (*layout.start, False, False)


def _successors(layout: Layout, state: State) -> list[tuple[str, State]]:
    """(action word, next state) for every action that changes the state, in a fixed order."""
    r, c, has_key, door_open = state
    out: list[tuple[str, State]] = []
    for name, (dr, dc) in DIRECTIONS.items():
        nxt = (r + dr, c + dc)
        if layout.passable(nxt, door_open):
            out.append((f"go {name}", (*nxt, has_key, door_open)))
    if not has_key and (r, c) == layout.key:
        out.append(("pick up key", (r, c, True, door_open)))
    if has_key and not door_open and is_adjacent((r, c), layout.door):
        out.append(("open door", (r, c, has_key, True)))
    return out


def is_adjacent(a: Pos, b: Pos) -> bool:
    return abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1


def plan(layout: Layout, state: State) -> tuple[str | None, int | None]:
    """First action word of a shortest plan from ``state`` to the goal, and the plan's length.

    ``(None, 0)`` at the goal; ``(None, None)`` when the goal is unreachable from ``state``.
    """
    if (state[0], state[1]) == layout.goal:
        return None, 0
    first: dict[State, str] = {}
    depth = {state: 0}
    queue = deque([state])
    while queue:
        current = queue.popleft()
        for word, nxt in _successors(layout, current):
            if nxt in depth:
                continue
            depth[nxt] = depth[current] + 1
            first[nxt] = first.get(current, word)
            if (nxt[0], nxt[1]) == layout.goal:
                return first[nxt], depth[nxt]
            queue.append(nxt)
    return None, None


def shortest_plan_length(layout: Layout, state: State) -> int | None:
    return plan(layout, state)[1]


def generate_layout(rng: random.Random, level: int) -> list[str] | None:
    """One random solvable layout for ``level`` (see :data:`LEVELS`), or ``None`` if this draw failed.

    A wall line splits the room in two with a single locked door; the start and the key lie on one
    side, the goal on the other, so the door must be opened. Extra walls are scattered at random; the
    draw is rejected unless the layout is solvable (BFS) and, where the level asks for it, the key is
    outside the agent's view at the start.
    """
    side, extra_walls, view, hide_key = LEVELS[level]
    n = side + 2  # with the border walls
    cells = [[WALL if r in (0, n - 1) or c in (0, n - 1) else FLOOR for c in range(n)] for r in range(n)]
    split = rng.randrange(2, n - 2)
    door_row = rng.randrange(1, n - 1)
    for r in range(1, n - 1):
        cells[r][split] = WALL
    interior = [(r, c) for r in range(1, n - 1) for c in range(1, n - 1) if c != split]
    left = [p for p in interior if p[1] < split]
    right = [p for p in interior if p[1] > split]
    near, far = (left, right) if rng.random() < 0.5 else (right, left)
    start, key = rng.sample(near, 2)
    goal = rng.choice(far)
    reserved = {start, key, goal, (door_row, split - 1), (door_row, split + 1)}
    for r, c in rng.sample([p for p in interior if p not in reserved], extra_walls):
        cells[r][c] = WALL
    cells[door_row][split] = DOOR
    for (r, c), ch in ((start, START), (key, KEY), (goal, GOAL)):
        cells[r][c] = ch
    if rng.random() < 0.5:  # a horizontal wall line half of the time
        cells = [list(col) for col in zip(*cells, strict=True)]
    grid = ["".join(row) for row in cells]
    try:
        layout = parse_layout(grid, "generated")
    except TaskFileError:
        return None
    if hide_key and max(abs(layout.start[0] - layout.key[0]), abs(layout.start[1] - layout.key[1])) <= view:
        return None
    return grid

