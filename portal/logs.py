"""Log filters of the portal's console handler."""

import logging


class RefusalsWithoutTraceback(logging.Filter):
    """A refused request (403) is logged as Django logs it, one line naming the path, without
    the traceback of the PermissionDenied a view raised: a refusal is an answer, not a fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
