"""The seed's code-repair reward as a pure function of per-test results.

    code compiles                       +0.2
    passes part of the tests            +0.3 × fraction of tests passed
    passes all tests                    +1.0
    introduces a new error              −0.5

*Introduces a new error* means: a test that passed on the original (buggy) code now fails, or the file
compiled originally and no longer does. Every term is reported (zero when not earned) under the names
``outcome/compiles``, ``outcome/partial``, ``outcome/all_pass`` and ``outcome/new_error``; their sum is the
reward. Range: −0.5 (broke a compiling file) to 1.5 (everything passes).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class CodeRepairWeights:
    compiles: float = 0.2
    partial: float = 0.3
    all_pass: float = 1.0
    new_error: float = -0.5


SEED_WEIGHTS = CodeRepairWeights()
TERM_NAMES = ("outcome/compiles", "outcome/partial", "outcome/all_pass", "outcome/new_error")


def introduces_new_error(*, baseline_compiles: bool, baseline_passed: Collection[str], compiles: bool,
                         passed: Collection[str]) -> bool:
    """True when the edit broke something that worked: the file stopped compiling, or a test id that
    passed on the original code is not among ``passed`` now."""
    if baseline_compiles and not compiles:
        return True
    return bool(set(baseline_passed) - set(passed))


def code_repair_reward(*, compiles: bool, passed: int, total: int, new_error: bool,
                       weights: CodeRepairWeights = SEED_WEIGHTS) -> dict[str, float]:
    """The four seed terms for ``passed`` of ``total`` tests. ``all_pass`` needs every test passed.

    Raises ``ValueError`` when ``total`` is not positive or ``passed`` is out of range (a task without
    tests cannot be graded).
    """
    if total <= 0:
        raise ValueError(f"total must be > 0 tests, got {total}")
    if not 0 <= passed <= total:
        raise ValueError(f"passed must be in [0, {total}], got {passed}")
    if not compiles and passed:
        raise ValueError(f"a file that does not compile cannot pass tests (passed={passed})")
    return {
        "outcome/compiles": weights.compiles if compiles else 0.0,
        "outcome/partial": weights.partial * passed / total,
        "outcome/all_pass": weights.all_pass if passed == total else 0.0,
        "outcome/new_error": weights.new_error if new_error else 0.0,
    }
