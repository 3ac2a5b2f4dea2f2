"""The soak test: the whole portal (web, Celery workers and beat, Redis, PostgreSQL, sandbox
clusters) on loopback for a bounded time, driven through its REST API by simulated leads and
admins while faults are injected, then checked against end invariants.

``python -m soak`` (or ``make soak``); see soak/run.py for the options.
"""
