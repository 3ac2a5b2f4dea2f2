"""A refused request is logged on one line, a failure with its traceback (portal/logs.py on
the console handler of settings.LOGGING)."""

import logging
import logging.config
import sys

from django.conf import settings

from portal.logs import RefusalsWithoutTraceback


def _formatted(status_code: int) -> str:
    try:
        raise PermissionError("Only platform admins and auditors may read the audit log.")
    except PermissionError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "django.request", logging.WARNING, __file__, 1, "Forbidden: %s", ("/audit/",), exc_info
    )
    record.status_code = status_code
    assert RefusalsWithoutTraceback().filter(record)
    formatter = logging.Formatter(settings.LOGGING["formatters"]["plain"]["format"])
    return formatter.format(record)


def test_a_refusal_is_one_line_and_a_failure_keeps_its_traceback():
    refused = _formatted(403)
    assert refused.endswith("WARNING django.request Forbidden: /audit/")
    assert "Traceback" not in refused and "\n" not in refused
    assert "Traceback" in _formatted(500)


def test_the_console_handler_filters_refusals():
    console = settings.LOGGING["handlers"]["console"]
    assert "refusals" in console["filters"]
    assert settings.LOGGING["filters"]["refusals"]["()"] == "portal.logs.RefusalsWithoutTraceback"
    # Build the handlers from the settings as Django does at start-up. Other tests (an
    # in-process Celery worker, pytest's capture) replace the root logger's handlers, so
    # the live ones are put back afterwards rather than looked up.
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        logging.config.dictConfig(settings.LOGGING)
        handler = next(h for h in root.handlers if h.get_name() == "console")
        assert any(isinstance(f, RefusalsWithoutTraceback) for f in handler.filters)
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
