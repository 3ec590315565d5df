"""Profiling hook for broker processes under a benchmark: with this directory first on
PYTHONPATH and ``PROFILE_DIR`` set, SIGUSR1 starts cProfile on the main thread (the event loop)
and SIGUSR2 stops it and writes ``<pid>-<n>.prof`` (pstats format) into ``PROFILE_DIR``.
Without ``PROFILE_DIR`` it does nothing. Used by ``bench/restructure_rate.py --cprofile``."""

from __future__ import annotations

import os
import signal
from types import FrameType

_dir = os.environ.get("PROFILE_DIR")
if _dir:
    import cProfile

    _profile: list[cProfile.Profile] = []

    def _start(_signum: int, _frame: FrameType | None) -> None:
        if not _profile:
            _profile.append(cProfile.Profile())
            _profile[0].enable()

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        if _profile:
            p = _profile.pop()
            p.disable()
            p.dump_stats(os.path.join(_dir, f"{os.getpid()}-{len(os.listdir(_dir))}.prof"))

    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
