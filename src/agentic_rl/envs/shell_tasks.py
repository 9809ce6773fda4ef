"""Generated directory trees and questions for ``shell-v0``.

Every task is ``(kind, seed)``: :func:`build_world` turns the seed into a small project tree (application
and access logs, per-service ``.ini`` configs, nested CSV data, notes, scattered ``.tmp`` files, an empty
``trash/``) and :func:`pose` turns the kind into a prompt plus the privileged answer — or, for tasks
that change state, a checker of the final workspace. The tree is rebuilt at every reset, so
perturbations (renamed folders, shuffled lines, distractor files) apply to any task, and answers are
computed on the tree the agent actually sees.

Levels: 0 count/grep · 1 find by property · 2 multi-step extraction · 3 change the workspace.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from agentic_rl.tasks.core import Task, TaskSet

SERVICES = ("auth", "billing", "search", "mailer", "gateway", "inventory", "reports", "scheduler")
REGIONS = ("north", "south", "east", "west")
PRODUCTS = ("widget", "gadget", "sprocket", "gizmo", "doohickey")
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
FOLDERS = {"logs": "logs", "data": "data", "config": "config", "notes": "notes", "trash": "trash"}
RENAMED = {"logs": "var/log", "data": "datasets", "config": "conf.d", "notes": "docs", "trash": "recycle"}
PERTURBATIONS = ("renamed_folders", "shuffled_lines", "distractor_files")

KIND_LEVEL = {"count_level": 0, "count_files": 0, "largest_file": 1, "sum_column": 1, "shared_port": 2,
              "top_error_service": 2, "move_tmp": 3, "rename_ext": 3}
KINDS = tuple(KIND_LEVEL)


@dataclass
class World:
    """A generated tree: ``files`` (relative path → text), the folder ``names`` in use, and facts."""

    files: dict[str, str]
    names: dict[str, str]
    services: dict[str, int] = field(default_factory=dict)  # service -> port
    shared_service: str = ""
    target_region: str = ""
    log_level: str = "ERROR"


@dataclass
class Question:
    prompt: str
    answer: str | None  # None for state-changing tasks
    expert_commands: list[str]
    check: Callable[[dict[str, str]], bool] | None = None  # final files -> solved?
    kind: str = "text"  # how to compare answers: "int", "path", "text"


def _log_lines(rng: random.Random, services: list[str]) -> list[str]:
    lines = []
    for i in range(rng.randint(40, 90)):
        level = rng.choices(LOG_LEVELS, weights=(3, 6, 2, 2))[0]
        svc = rng.choice(services)
        msg = rng.choice(("request handled", "cache miss", "retrying upstream", "slow query", "user login",
                          "queue drained", "connection reset", "config reloaded"))
        lines.append(f"2024-05-{1 + i // 30:02d} {8 + i % 12:02d}:{(i * 7) % 60:02d}:{(i * 13) % 60:02d} "
                     f"{level} [{svc}] {msg}")
    return lines


def _break_error_tie(rng: random.Random, lines: list[str], services: list[str]) -> None:
    counts = Counter(line.split()[3][1:-1] for line in lines if line.split()[2] == "ERROR")
    top = max(services, key=lambda s: (counts.get(s, 0), s))
    lines.insert(rng.randrange(len(lines) + 1), f"2024-05-09 23:59:59 ERROR [{top}] disk quota exceeded")


def _csv(rng: random.Random, rows: int) -> str:
    out = ["region,product,units,price"]
    for _ in range(rows):
        out.append(f"{rng.choice(REGIONS)},{rng.choice(PRODUCTS)},{rng.randint(1, 40)},{rng.randint(2, 90)}.{rng.randint(0, 99):02d}")
    return "\n".join(out) + "\n"


def build_world(seed: int, perturbation: str | None = None) -> World:
    """The tree for ``seed`` (deterministic), with ``perturbation`` applied."""
    rng = random.Random(seed)
    names = dict(RENAMED if perturbation == "renamed_folders" else FOLDERS)
    logs, data, config, notes, trash = (names[k] for k in ("logs", "data", "config", "notes", "trash"))
    services = rng.sample(SERVICES, rng.randint(4, 6))
    ports = rng.sample(range(8000, 9000), len(services) + 6)
    world = World({}, names, dict(zip(services, ports, strict=False)))
    files = world.files
    app_lines = _log_lines(rng, services)
    _break_error_tie(rng, app_lines, services)
    world.shared_service = rng.choice(services)
    other_ports = ports[len(services):]
    access = []
    for i in range(rng.randint(25, 60)):
        port = rng.choice(other_ports)
        access.append(f'10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)} - - [05/May/2024:10:{i % 60:02d}:00] '
                      f'"GET /{rng.choice(("api", "login", "static", "health"))} HTTP/1.1" '
                      f'{rng.choice((200, 200, 301, 404, 500))} {rng.randint(100, 9000)} '
                      f'upstream=127.0.0.1:{port}')
    for _ in range(rng.randint(1, 3)):
        access.insert(rng.randrange(len(access) + 1),
                      f'10.0.0.7 - - [05/May/2024:11:00:00] "POST /api HTTP/1.1" 200 512 '
                      f'upstream=127.0.0.1:{world.services[world.shared_service]}')
    if perturbation == "shuffled_lines":
        rng.shuffle(app_lines)
        rng.shuffle(access)
    files[f"{logs}/app.log"] = "\n".join(app_lines) + "\n"
    files[f"{logs}/access.log"] = "\n".join(access) + "\n"
    for svc, port in world.services.items():
        files[f"{config}/{svc}.ini"] = f"[service]\nname = {svc}\nport = {port}\nworkers = {rng.randint(1, 8)}\n"
    csv_paths = [f"{data}/sales.csv", f"{data}/2023/q1/north.csv", f"{data}/2023/q2/south.csv",
                 f"{data}/raw/export_{rng.randint(100, 999)}.csv", f"{data}/raw/archive/old.csv"]
    sizes = rng.sample(range(3, 40), len(csv_paths))
    for path, rows in zip(csv_paths, sizes, strict=True):
        files[path] = _csv(rng, rows)
    files[f"{data}/raw/README"] = "exported nightly\n"
    world.target_region = rng.choice(REGIONS)
    files[f"{notes}/todo.txt"] = "rotate logs\nupdate configs\n"
    files[f"{notes}/meeting.txt"] = "ports are in the config folder\n"
    files[f"{notes}/ideas.md"] = "# ideas\n"
    tmp_dirs = [logs, f"{data}/2023", notes, f"{data}/raw", "."]
    for i in range(rng.randint(3, 5)):
        folder = tmp_dirs[i % len(tmp_dirs)]
        files[f"{folder}/scratch_{i}.tmp".removeprefix("./")] = f"temporary {i}\n"
    files[f"{trash}/.keep"] = ""
    world.log_level = rng.choice(("ERROR", "WARN"))
    if perturbation == "distractor_files":
        _add_distractors(rng, world)
    return world


def _add_distractors(rng: random.Random, world: World) -> None:
    """Files that look relevant but do not change any answer."""
    n = world.names
    files = world.files
    files[f"{n['logs']}/app.log.1"] = "2024-04-30 10:00:00 ERROR [auth] old failure\n" * rng.randint(2, 9)
    shared_port = world.services[world.shared_service]
    other = next(p for p in range(8000, 9000) if p not in world.services.values() and p != shared_port)
    files[f"{n['config']}/legacy.ini.bak"] = f"[service]\nname = legacy\nport = {other}\n"
    files[f"{n['logs']}/access.log.old"] = f'10.0.0.1 - - [01/Jan/2024:00:00:00] "GET / HTTP/1.1" 200 1 upstream=127.0.0.1:{other}\n'
    files[f"{n['data']}/raw/notes.txt"] = "not a csv\n"
    files[f"{n['notes']}/template.tmpl"] = "not a tmp file\n"


def _normalise_path(text: str) -> str:
    return text.strip().strip("'\"`").removeprefix("./").rstrip("/")


def answers_match(given: str, expected: str, kind: str) -> bool:
    """Lenient comparison of a final answer: numbers by value, paths without ``./``, text case-insensitive."""
    given = given.strip().strip("'\"`").rstrip(".").strip()
    if kind == "int":
        try:
            return int(given.replace(",", "")) == int(expected)
        except ValueError:
            return False
    if kind == "path":
        return _normalise_path(given) == _normalise_path(expected)
    return given.lower() == expected.lower()


def _unchanged(before: dict[str, str], after: dict[str, str], moved: set[str]) -> bool:
    return all(after.get(path) == text for path, text in before.items() if path not in moved)


def pose(kind: str, world: World, params: dict | None = None) -> Question:
    """The question of ``kind`` on ``world`` (prompt, privileged answer or state check, expert commands)."""
    n = world.names
    files = world.files
    logs, data, config, notes, trash = (n[k] for k in ("logs", "data", "config", "notes", "trash"))
    if kind == "count_level":
        level = world.log_level
        count = sum(1 for line in files[f"{logs}/app.log"].splitlines() if line.split()[2] == level)
        return Question(f"How many {level} lines are in {logs}/app.log? Answer with a number.", str(count),
                        [f"grep -c ' {level} ' {logs}/app.log"], kind="int")
    if kind == "count_files":
        count = sum(1 for p in files if p.startswith(f"{data}/") and p.endswith(".csv"))
        return Question(f"How many .csv files are there under {data}/ (in all subfolders)? Answer with a number.",
                        str(count), [f"find {data} -name '*.csv' | wc -l"], kind="int")
    if kind == "largest_file":
        under = {p: len(t.encode()) for p, t in files.items() if p.startswith(f"{data}/")}
        largest = max(under, key=lambda p: (under[p], p))
        return Question(f"Which file under {data}/ is the largest in bytes? Answer with its path relative to "
                        f"the current directory.", largest,
                        [f"find {data} -type f -printf '%s %p\\n' | sort -n | tail -3"], kind="path")
    if kind == "sum_column":
        region = world.target_region
        rows = [r.split(",") for r in files[f"{data}/sales.csv"].splitlines()[1:]]
        units = sum(int(r[2]) for r in rows if r[0] == region)
        return Question(f"In {data}/sales.csv, how many units were sold in total in region '{region}'? "
                        f"Answer with a number.", str(units),
                        [f"awk -F, '$1==\"{region}\" {{s+=$3}} END {{print s+0}}' {data}/sales.csv"], kind="int")
    if kind == "shared_port":
        return Question(f"Each service in {config}/*.ini has a port. Exactly one of those ports also appears in "
                        f"{logs}/access.log. Which service is it? Answer with the service name.",
                        world.shared_service,
                        [f"for f in {config}/*.ini; do p=$(sed -n 's/^port = //p' \"$f\"); "
                         f"if grep -q \":$p\\b\" {logs}/access.log; then echo \"$f\"; fi; done"])
    if kind == "top_error_service":
        counts = Counter(line.split()[3][1:-1] for line in files[f"{logs}/app.log"].splitlines()
                         if line.split()[2] == "ERROR")
        top = max(counts, key=lambda s: (counts[s], s))
        return Question(f"Which service (the name in brackets) has the most ERROR lines in {logs}/app.log? "
                        f"Answer with the service name.", top,
                        [f"grep ' ERROR ' {logs}/app.log | awk '{{print $4}}' | sort | uniq -c | sort -rn | head -3"])
    if kind == "move_tmp":
        originals = {p: t for p, t in files.items() if p.endswith(".tmp")}

        def check(after: dict[str, str]) -> bool:
            stray = [p for p in after if p.endswith(".tmp") and not p.startswith(f"{trash}/")]
            in_trash = all(after.get(f"{trash}/{p.rsplit('/', 1)[-1]}") == t for p, t in originals.items())
            return not stray and in_trash and _unchanged(files, after, set(originals))

        return Question(f"Move every .tmp file (anywhere in the current directory tree) into {trash}/, keeping "
                        f"file names. Then answer 'done'.", None,
                        [f"find . -name '*.tmp' -not -path './{trash}/*' -exec mv {{}} {trash}/ \\;",
                         f"ls {trash}"], check)
    if kind == "rename_ext":
        originals = {p: t for p, t in files.items() if p.startswith(f"{notes}/") and p.endswith(".txt")}

        def check(after: dict[str, str]) -> bool:
            renamed = all(p not in after and after.get(p[:-4] + ".md") == t for p, t in originals.items())
            return renamed and _unchanged(files, after, set(originals))

        return Question(f"Rename every .txt file directly in {notes}/ to the same name ending in .md. "
                        f"Then answer 'done'.", None,
                        [f"for f in {notes}/*.txt; do mv \"$f\" \"${{f%.txt}}.md\"; done", f"ls {notes}"], check)
    raise ValueError(f"unknown shell task kind {kind!r}; kinds: {', '.join(KINDS)}")


def shell_tasks(per_kind: int = 12, seed: int = 0, test_fraction: float = 0.25) -> TaskSet:
    """``per_kind`` tasks of every kind; the last ``test_fraction`` of each kind's seeds form ``test``."""
    tasks = []
    for k_index, kind in enumerate(KINDS):
        n_test = max(1, round(per_kind * test_fraction))
        for i in range(per_kind):
            task_seed = seed * 100_003 + k_index * 1_000 + i
            prompt = pose(kind, build_world(task_seed)).prompt
            tasks.append(Task(f"shell-{kind}-{i:03d}", prompt, {"kind": kind, "seed": task_seed},
                              KIND_LEVEL[kind], "test" if i >= per_kind - n_test else "train", "shell-v0", (kind,)))
    return TaskSet(tasks, name="shell")
