"""Child processes that never outlive the process that started them."""

from __future__ import annotations

import ctypes
import ctypes.util
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A ``preexec_fn``: on Linux the child gets SIGTERM when its parent dies, even by
    SIGKILL, so no orphan is left. The signal comes when the *thread* that forked the child
    ends: start long-lived children from a thread that lives as long as they should."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
