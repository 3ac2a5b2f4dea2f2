"""One parser for the days and months people type, in pages, the API and commands alike: a
malformed or impossible value (2026-02-30, 2026-13-01, 0000-01) is refused naming the field,
never a 500."""

from __future__ import annotations

import re
from datetime import date

from django.utils.translation import gettext as _

from common.errors import ValidationFailed

# ASCII digits only: \d would take other scripts' digits too (Arabic-Indic, full-width).
DAY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")


def _date(year: str, month: str, day: str) -> date | None:
    try:
        return date(int(year), int(month), int(day))
    except ValueError:  # year 0, month 13, February 30
        return None


def day_or_none(text: str) -> date | None:
    """``YYYY-MM-DD`` as a date; None for anything else, impossible days included."""
    match = DAY.fullmatch(text.strip()) if isinstance(text, str) else None
    return _date(*match.groups()) if match else None


def month_or_none(text: str) -> date | None:
    """``YYYY-MM`` as the first day of that month; None for anything else."""
    match = MONTH.fullmatch(text.strip()) if isinstance(text, str) else None
    return _date(*match.groups(), "1") if match else None


def parse_day(text: str, *, field: str) -> date:
    """``YYYY-MM-DD`` as a date, or ValidationFailed naming ``field``."""
    value = day_or_none(text)
    if value is None:
        raise ValidationFailed(
            _("%(field)s: give a day as YYYY-MM-DD, got %(value)s")
            % {"field": field, "value": repr(text)},
            field=field,
        )
    return value


def parse_month(text: str, *, field: str = "month") -> date:
    """``'2025-06'`` as ``date(2025, 6, 1)``, or ValidationFailed naming ``field``."""
    value = month_or_none(text)
    if value is None:
        raise ValidationFailed(
            _("%(field)s: give a month as YYYY-MM, got %(value)s")
            % {"field": field, "value": repr(text)},
            field=field,
        )
    return value
