"""Waiting on a condition with a deadline instead of sleeping a fixed time."""

from __future__ import annotations

import time

import pytest


def poll(what: str, check, timeout: float = 60, interval: float = 0.5):
    """``check()``'s first truthy answer, asked every ``interval`` seconds; fails naming
    ``what`` after ``timeout`` seconds. The control plane acts asynchronously (controllers,
    schedulers, and the API server loading admission policies), so tests wait for effects."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
