"""Query parameters of the API lists, checked: a bad value is a 400 naming the parameter."""

from datetime import date, datetime, time

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from portal.errors import ValidationFailed
from quotas.models import Cluster


def param(params, key: str) -> str:
    return (params.get(key) or "").strip()


def cluster_param(params, key: str = "cluster") -> Cluster | None:
    """The cluster named by ``?cluster=`` (None when absent); unknown names are refused."""
    name = param(params, key)
    if not name:
        return None
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ValidationFailed(f"{key}: no cluster named {name!r}", field=key)
    return cluster


def choice_param(params, key: str, choices) -> str | None:
    value = param(params, key)
    if not value:
        return None
    if value not in choices:
        raise ValidationFailed(
            f"{key}: {value!r} is not one of {', '.join(sorted(choices))}", field=key
        )
    return value


def day_param(params, key: str, *, required: bool = False) -> date | None:
    text = param(params, key)
    if not text and not required:
        return None
    value = parse_date(text) if text else None
    if value is None:
        raise ValidationFailed(f"{key}: give a day as YYYY-MM-DD, got {text!r}", field=key)
    return value


def moment_param(params, key: str, *, end_of_day: bool = False) -> datetime | None:
    """An ISO 8601 time (a day alone means its start, or its end with ``end_of_day``)."""
    text = param(params, key)
    if not text:
        return None
    try:
        # A day alone first: fromisoformat (under parse_datetime) reads it as its midnight.
        if (day := parse_date(text)) is not None:
            value = datetime.combine(day, time.max if end_of_day else time.min)
        else:
            value = parse_datetime(text)
    except ValueError:
        value = None
    if value is None:
        raise ValidationFailed(
            f"{key}: give a time as ISO 8601 (2026-01-31T12:00:00Z) or a day, got {text!r}",
            field=key,
        )
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_default_timezone())
    return value


def period_check(start, end, *, start_key: str = "start", end_key: str = "end") -> None:
    if start is not None and end is not None and end < start:
        raise ValidationFailed(f"{end_key}: must not be before {start_key}", field=end_key)
