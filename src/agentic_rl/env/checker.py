"""Environment checkers. (Placeholder: the env-layer work fills in the passive and invasive checks.)"""

from __future__ import annotations

import gymnasium


class PassiveChecker(gymnasium.Wrapper):
    """Cheap contract checks applied by ``make()``; warns, never raises for the env's own output."""
