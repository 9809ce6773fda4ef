"""Run every benchmark in this folder and rewrite BENCHMARKS.md and benchmarks/results.json.

Each ``benchmarks/<name>.py`` exposes ``run(quick: bool = False) -> list[dict]`` whose rows carry
``name``, ``value``, ``baseline``, ``ratio``, ``unit`` (and optionally ``goal`` and ``note``). Ratios are
measured in one process against a baseline run in the same process: these machines are noisy.

Usage: ``python benchmarks/run_all.py [--quick] [--only NAME ...]``  (``make bench`` runs it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short versions of every benchmark")
    parser.add_argument("--only", nargs="*", default=None, help="benchmark file stems to run")
    args = parser.parse_args(argv)
    date = dt.date.today().isoformat()
    results_path = HERE / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    sections: dict[str, dict] = {}
    if (HERE / "sections.json").exists():
        sections = json.loads((HERE / "sections.json").read_text())
    failed = []
    for path in sorted(HERE.glob("*.py")):
        if path.stem in ("run_all",) or path.stem.startswith("_"):
            continue
        if args.only and path.stem not in args.only:
            continue
        print(f"== {path.stem}", flush=True)
        start = time.perf_counter()
        try:
            module = _load(path)
            rows = module.run(quick=args.quick)
        except Exception:  # a broken benchmark must not hide the others' results
            traceback.print_exc()
            failed.append(path.stem)
            continue
        elapsed = time.perf_counter() - start
        # a benchmark may name environment variables that changed what it measured (``command_env()``)
        env_prefix = getattr(module, "command_env", lambda: "")()
        cmd = f"{env_prefix}python benchmarks/run_all.py --only {path.stem}" + (" --quick" if args.quick else "")
        sections[path.stem] = {"date": date, "command": cmd, "seconds": round(elapsed, 1), "rows": rows}
        for row in rows:
            results[row["name"]] = {k: row.get(k) for k in ("value", "baseline", "ratio", "unit")} | {"date": date}
            print(f"   {row['name']}: {row.get('value')} {row.get('unit', '')} (baseline {row.get('baseline')}, "
                  f"ratio {row.get('ratio')})", flush=True)
    results_path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    (HERE / "sections.json").write_text(json.dumps(sections, indent=2, sort_keys=True) + "\n")
    _write_markdown(sections)
    if failed:
        print(f"failed benchmarks: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "" if value is None else str(value)


def _write_markdown(sections: dict[str, dict]) -> None:
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python benchmarks/run_all.py`); the same figures are in",
        "`benchmarks/results.json`. Every ratio is measured in one process against a baseline run in the same",
        "process, because these machines are noisy. Machine: " + _machine() + ".",
        "",
    ]
    manual = ROOT / "benchmarks" / "NOTES.md"
    for name, sec in sorted(sections.items()):
        lines += [f"## {name}", "", f"Date {sec['date']}, command `{sec['command']}` ({sec['seconds']} s).", ""]
        lines += ["| measure | value | baseline | ratio | unit | goal | note |", "|---|---|---|---|---|---|---|"]
        for row in sec["rows"]:
            cells = [row.get("name"), row.get("value"), row.get("baseline"), row.get("ratio"), row.get("unit"),
                     row.get("goal"), row.get("note")]
            lines.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
        lines.append("")
    if manual.exists():
        lines += [manual.read_text()]
    (ROOT / "BENCHMARKS.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
