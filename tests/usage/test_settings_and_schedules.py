"""The usage settings: same defaults in settings.py, .env.example and the README; beat entries."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMES = (
    "USAGE_COLLECT_SECONDS",
    "USAGE_ROLLUP_SECONDS",
    "USAGE_ROLLUP_CONNECTIONS",
    "USAGE_RETENTION_DAYS",
    "USAGE_SAMPLE_MAX_GAP_SECONDS",
    "PROMETHEUS_TIMEOUT",
)


@pytest.mark.parametrize("name", NAMES)
def test_defaults_agree(name):
    settings_py = (ROOT / "portal" / "settings.py").read_text()
    [code] = re.findall(rf'env\.\w+\("{name}", default=([0-9.]+)\)', settings_py)
    [example] = re.findall(rf"^{name}=(.*)$", (ROOT / ".env.example").read_text(), re.M)
    [readme] = re.findall(rf"^\| `{name}` \| `([^`]*)` \|", (ROOT / "README.md").read_text(), re.M)
    assert float(code) == float(example) == float(readme)


@pytest.mark.django_db
def test_beat_collects_and_rolls_up_usage_at_the_configured_interval():
    from django.conf import settings
    from django_celery_beat.models import PeriodicTask

    from portal.schedules import ensure_default_schedules

    ensure_default_schedules()
    collect = PeriodicTask.objects.get(task="quotas.collect_usage")
    assert collect.interval.every == settings.USAGE_COLLECT_SECONDS == 300
    assert PeriodicTask.objects.get(task="quotas.rollup_usage").interval.every == 3600
