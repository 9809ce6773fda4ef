"""``agentic-rl eval``: evaluate one policy, or compare several on the same tasks and seeds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import typer


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` (inclusive) or a mix: ``"0-2,7"``. Seeds are non-negative integers."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise typer.BadParameter(f"--seeds: {part!r} is not a non-negative integer or a range like 0-4")
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise typer.BadParameter(f"--seeds: range {part!r} is empty")
        seeds.extend(range(low, high + 1))
    if not seeds:
        raise typer.BadParameter("--seeds: give at least one seed, e.g. 0 or 0-4")
    return seeds


def _run_config(policies: list[str]) -> dict[str, Any]:
    """The config.yaml of the first policy that is a run directory (for the env id, split, turns)."""
    import yaml

    for spec in policies:
        path = Path(spec) / "config.yaml"
        if path.exists():
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                return loaded
    return {}


def _check_split(task_file: str, split: str) -> None:
    """An explicit ``--split`` that the task file does not have is an error, not "evaluate every task".

    (Without ``--split`` a file whose tasks carry no ``test`` split is evaluated whole, on purpose.)
    """
    from agentic_rl.tasks import TaskSet

    present = TaskSet.load(task_file).splits()
    if split not in present:
        raise typer.BadParameter(f"--split {split!r}: {task_file} has no task in that split; "
                                 f"splits present: {', '.join(present)}")


def register(app: typer.Typer) -> None:
    """Add this stage's commands to ``app``."""

    @app.command("eval")
    def eval_command(
        policies: list[str] = typer.Argument(..., help="expert[:skill], a run dir, a checkpoint dir or a model "
                                             "name; with --compare, two or more (the first is the baseline)"),
        compare: bool = typer.Option(False, "--compare", help="compare the policies on the same tasks and seeds"),
        env: str | None = typer.Option(None, "--env", "-e", help="env id (default: the run dir's config)"),
        split: str | None = typer.Option(None, help="task split (default: the config's eval split, else test)"),
        tasks: Path | None = typer.Option(None, help="JSONL task file instead of the env's own tasks"),
        seeds: str = typer.Option("0", help="env seeds: 0,1,2 or 0-4"),
        samples_k: int = typer.Option(1, "--samples-k", "-k", help="samples per task and seed (pass@k; "
                                      "needs --sample)"),
        sample: bool = typer.Option(False, "--sample", help="sample instead of greedy decoding"),
        temperature: float = typer.Option(1.0, help="sampling temperature with --sample"),
        perturb: list[str] = typer.Option([], "--perturb", "-p", help="perturbation name (repeat), or 'all'"),
        max_turns: int | None = typer.Option(None, help="max env steps per episode (default: config, else 10)"),
        max_new_tokens: int = typer.Option(128, help="tokens per policy turn"),
        limit: int | None = typer.Option(None, help="evaluate only the first N tasks"),
        env_kwargs: str = typer.Option("{}", help="JSON object of extra make() arguments"),
        out: Path | None = typer.Option(None, help="write result.json / eval.jsonl / trajectories.jsonl "
                                        "(and compare.json, shown by `report`) into this directory; in a run "
                                        "dir, per-policy results go to evaluations/policy_<i>/"),
        json_output: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
    ) -> None:
        """Success rate (Wilson CI), reward, steps, pass@k, per-level and perturbed success, failures, audit."""
        from agentic_rl.evaluate.compare import compare as compare_results
        from agentic_rl.evaluate.harness import evaluate
        from agentic_rl.evaluate.text import format_comparison, format_result

        if compare and len(policies) < 2:
            raise typer.BadParameter("--compare needs at least two policies, e.g. expert runs/my-run")
        if not compare and len(policies) > 1:
            raise typer.BadParameter("several policies given: add --compare to compare them")
        try:
            extra = json.loads(env_kwargs)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"--env-kwargs is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise typer.BadParameter("--env-kwargs must be a JSON object")
        config = _run_config(policies)
        env_cfg = config.get("env", {}) if isinstance(config.get("env"), dict) else {}
        env_id = env or env_cfg.get("env_id")
        if not env_id:
            raise typer.BadParameter("--env is required (no run dir with a config.yaml among the policies)")
        kwargs = dict(env_cfg.get("env_kwargs") or {}) if not env else {}
        kwargs.update(extra)
        chosen_split = split or env_cfg.get("eval_split") or "test"
        task_source = tasks or env_cfg.get("task_file")
        if split and task_source:
            _check_split(task_source, split)
        turns = max_turns or env_cfg.get("max_turns") or 10
        results = []
        for policy in policies:
            try:
                results.append(evaluate(policy, env_id, task_source, split=chosen_split, seeds=parse_seeds(seeds),
                                        greedy=not sample, samples_k=samples_k, perturbations=perturb,
                                        max_turns=int(turns), max_new_tokens=max_new_tokens, temperature=temperature,
                                        limit=limit, env_kwargs=kwargs, label=policy))
            except (ValueError, KeyError, FileNotFoundError) as exc:
                typer.echo(f"error: {policy}: {exc}", err=True)
                raise typer.Exit(2) from None
        comparison = compare_results(results) if compare else None
        if out is not None:
            # Never overwrite a training run's own eval.jsonl: inside a run dir, results go to a subfolder.
            is_run_dir = (out / "metrics.jsonl").exists() or (out / "config.yaml").exists()
            base = out / "evaluations" if is_run_dir else out
            for i, result in enumerate(results):
                result.save(base if len(results) == 1 and not is_run_dir else base / f"policy_{i}")
            if comparison is not None:
                comparison.save(out / "compare.json")
        if json_output:
            payload: dict[str, Any] = {"results": [r.to_dict() for r in results]}
            if comparison is not None:
                payload["comparison"] = comparison.to_dict()
            typer.echo(json.dumps(payload, indent=1, default=str))
            return
        for result in results:
            typer.echo(format_result(result) + "\n")
        if comparison is not None:
            typer.echo(format_comparison(comparison))
