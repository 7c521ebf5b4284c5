"""A SIGTERM to pytest ends the session as Ctrl-C does: the running test stops and every
fixture's teardown runs (a loopback fleet's processes stopped, its folders removed), where
Python's default for SIGTERM would end the process at once and leave them running. A second
SIGTERM ends it at once, for whoever means it."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    signal.signal(signum, signal.SIG_DFL)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def pytest_configure(config: pytest.Config) -> None:
    # signal.signal works only in a main thread: a runner embedding pytest in another
    # thread keeps Python's default.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
