"""Emergency stop: a stop file and SIGINT/SIGTERM become a request to stop *after* the current update.

The training loop polls :meth:`EmergencyStop.requested` between stages; when it returns a reason the loop
finishes the update in progress, saves a checkpoint and exits cleanly. A second SIGINT while a stop is
pending raises ``KeyboardInterrupt`` (the user insists).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

STOP_FILE = "STOP"


class EmergencyStop:
    """Context manager watching ``run_dir/STOP`` and (in the main thread) SIGINT/SIGTERM."""

    def __init__(self, run_dir: str | Path, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)):
        self.stop_file = Path(run_dir) / STOP_FILE
        self.signals = signals
        self.reason: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.reason is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.reason = f"signal:{signal.Signals(signum).name}"

    def __enter__(self) -> EmergencyStop:
        if threading.current_thread() is threading.main_thread():
            for signum in self.signals:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def requested(self) -> str | None:
        """``signal:SIGTERM`` / ``signal:SIGINT`` / ``stop_file`` once a stop was asked for, else None."""
        if self.reason is None and self.stop_file.exists():
            self.reason = "stop_file"
        return self.reason
