"""Hand-made trajectories for audit and failure-analysis tests."""

from __future__ import annotations

from agentic_rl.rollout.trajectory import Trajectory, Turn


def turn(action: str, *, reward: float = 0.0, terms: dict[str, float] | None = None, error: str | None = None,
         kind: str = "command", terminated: bool = False, truncated: bool = False,
         hack_flags: list[str] | None = None) -> Turn:
    info: dict = {"action_kind": "invalid" if error == "parse_error" else kind}
    if error:
        info["error"] = error
    if hack_flags:
        info["hack_flags"] = hack_flags
    return Turn(observation="obs", action=action, reward=reward, reward_terms=terms or {"step_cost": reward},
                terminated=terminated, truncated=truncated, info=info)


def episode(turns: list[Turn], *, success: bool = False, termination: str | None = None,
            task_id: str = "t") -> Trajectory:
    if termination is None:
        termination = "success" if success else ("truncated" if turns and turns[-1].truncated else "failed")
    return Trajectory(task_id=task_id, env_id="x-v0", turns=turns, success=success, termination=termination)


def solved(task_id: str = "ok") -> Trajectory:
    """A clean successful episode: look around, then answer (outcome term only)."""
    return episode([turn("<action>ls</action>", reward=-0.01),
                    turn("<answer>42</answer>", reward=1.0, terms={"outcome": 1.0}, kind="answer", terminated=True)],
                   success=True, task_id=task_id)
