"""suggestions_compute, suggest_quotas and the monthly beat entry."""

import re
from datetime import date
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import translation

from common.dates import parse_month
from common.errors import ValidationFailed
from portal.schedules import ensure_default_schedules
from quotas.models import TeamNamespace
from tests.support.usage import JUNE, rollup
from usage.models import Suggestion
from usage.suggestions import previous_month, suggestions_compute

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.django_db
def test_a_month_of_rollups_becomes_one_suggestion_per_allocation(june_suggestions):
    a, b = june_suggestions["team-a-training"], june_suggestions["team-b-inference"]
    # training, mean 2 with a peak of 3 (no samples: each day's rollup stands in, its mean for
    # 23 hours and its peak for one): a third GPU would idle 23 hours a day -> 2; cap
    # ceil(3 x 1.25) = 4
    assert (a.current_guarantee, a.current_cap) == (6, 10)
    assert (a.suggested_guarantee, a.suggested_cap) == (2, 4)
    assert "idle_guarantee" in a.flags and a.confidence == "high"
    assert a.figures["days_of_data"] == 30 and a.figures["utilization_mean"] == "40"
    # inference, steady at 6: guarantee 6 (its mean), cap ceil(7.5) = 8 = 50% of 16
    assert (b.suggested_guarantee, b.suggested_cap) == (6, 8)
    assert b.figures["pending_wait_max_seconds"] == 120
    assert a.month == JUNE and a.cluster.name == "demo"


@pytest.mark.django_db
def test_computing_again_replaces_the_month_and_drops_what_is_gone(june_suggestions, cluster, gpu):
    team = june_suggestions["team-a-training"].team_namespace.team
    extra = TeamNamespace.objects.create(team=team, cluster=cluster, name="team-a-dev")
    rollup(extra, gpu, date(2025, 6, 10), peak=1)
    assert suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 7, 2)) == 3
    assert Suggestion.objects.filter(month=JUNE).count() == 3
    extra.usage_days.all().delete()
    assert suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 7, 3)) == 2
    assert not Suggestion.objects.filter(team_namespace=extra).exists()


@pytest.mark.django_db
def test_a_month_in_progress_is_said_to_be(june_usage, cluster):
    suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 6, 20))
    s = Suggestion.objects.get(team_namespace__name="team-a-training")
    assert "month_not_over" in s.flags and s.confidence == "medium"
    assert s.figures["days_of_data"] == 19  # only the days before today are read


@pytest.mark.django_db
def test_over_subscribed_suggestions_go_where_they_save_the_most(june_usage, cluster):
    cluster.capacities.update(capacity=Decimal(7))
    cluster.max_cap_share = Decimal(1)
    cluster.save()
    suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 7, 1))
    rows = {s.team_namespace.name: s for s in Suggestion.objects.select_related("team_namespace")}
    # 2 + 6 = 8 > 7. Each of inference's 6 GPUs, busy all the time, saves 2 borrowed
    # unit-hours' price an hour; training's, 0.5: inference keeps its 6, training gets 1.
    assert rows["team-b-inference"].suggested_guarantee == 6
    assert rows["team-a-training"].suggested_guarantee == 1
    assert "scaled_down" in rows["team-a-training"].flags
    assert "scaled_down" not in rows["team-b-inference"].flags
    # The cluster's prices decide: borrowing training work as dear as inference's, and
    # inference's as cheap as training's, the GPU goes the other way round.
    cluster.suggest_borrowed_price = Decimal(3)
    cluster.suggest_inference_borrowed_price = Decimal("0.5")
    cluster.save()
    suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 7, 1))
    rows = {s.team_namespace.name: s for s in Suggestion.objects.select_related("team_namespace")}
    assert rows["team-a-training"].suggested_guarantee == 2
    assert rows["team-b-inference"].suggested_guarantee == 5


def test_month_parsing_names_the_field():
    assert parse_month("2025-06") == date(2025, 6, 1)
    for bad in ("2025-13", "June", "2025-6", ""):
        with pytest.raises(ValidationFailed) as exc:
            parse_month(bad)
        assert exc.value.field == "month" and "YYYY-MM" in exc.value.message
    assert previous_month(date(2025, 1, 15)) == date(2024, 12, 1)


@pytest.mark.django_db
def test_suggest_quotas_command(june_usage, cluster):
    out, err = StringIO(), StringIO()
    call_command(
        "suggest_quotas", "--cluster", "demo", "--month", "2025-06", stdout=out, stderr=err
    )
    assert re.search(r"team-a-training\s+nvidia.com/gpu\s+6/10 -> 2/4", out.getvalue())
    assert "2 suggestions for demo 2025-06" in err.getvalue()
    with pytest.raises(CommandError, match="--cluster: no cluster named 'nope'"):
        call_command("suggest_quotas", "--cluster", "nope")
    with pytest.raises(CommandError, match="--month: give a month as YYYY-MM"):
        call_command("suggest_quotas", "--cluster", "demo", "--month", "2025-13")


@pytest.mark.django_db
def test_the_monthly_beat_entry_follows_the_settings():
    from django_celery_beat.models import PeriodicTask

    ensure_default_schedules()
    task = PeriodicTask.objects.get(name="monthly suggestions")
    assert task.task == "quotas.compute_suggestions"
    assert task.crontab.day_of_month == str(settings.SUGGESTIONS_DAY_OF_MONTH)
    assert task.crontab.hour == str(settings.SUGGESTIONS_HOUR)
    assert task.interval is None


def test_settings_env_example_and_readme_agree_on_the_suggestion_schedule():
    env = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    for name in ("SUGGESTIONS_DAY_OF_MONTH", "SUGGESTIONS_HOUR"):
        default = getattr(settings, name)
        assert re.search(rf"^{name}={default}$", env, re.M), name
        assert f"| `{name}` | `{default}` |" in readme, name


@pytest.mark.django_db
def test_the_monthly_task_computes_last_month_for_every_cluster(june_usage, cluster):
    from usage.tasks import compute_cluster_suggestions

    assert compute_cluster_suggestions(cluster.pk, "2025-06") == 2
    assert compute_cluster_suggestions(10_000) == 0


@pytest.mark.django_db
def test_notes_and_the_how_are_kept_as_texts_and_read_in_the_readers_language(june_usage, cluster):
    cluster.capacities.update(capacity=Decimal(7))
    cluster.max_cap_share = Decimal(1)
    cluster.save()
    suggestions_compute(cluster=cluster, month=JUNE, today=date(2025, 7, 1))
    s = Suggestion.objects.get(team_namespace__name="team-a-training")
    # Stored: the English wording beside the text it is rendered from again.
    stored = {note["text"]["msgid"]: note for note in s.notes}
    held = next(note for msgid, note in stored.items() if "by capacity" in msgid)
    assert "%(guarantee)s" in held["text"]["msgid"] and held["text"]["params"]["guarantee"] == "1"
    assert "guarantee held to 1 by capacity on demo" in held["message"]
    assert s.figures["basis"]["message"].startswith("guarantee: the least expected cost")
    with translation.override("zh-hans"):
        notes = s.localized_notes
        how = s.localized_figures["basis"]
    assert len(notes) == len(s.notes)
    assert not any(re.search(r"[A-Za-z]{4,} [a-z]{3,}", n) for n in notes), notes
    held_at = next(i for i, n in enumerate(s.notes) if "by capacity" in n["text"]["msgid"])
    assert "1" in notes[held_at] and "demo" in notes[held_at]
    assert "1.25" in how and not re.search(r"expected|borrowed|demand", how)


@pytest.mark.django_db
def test_a_suggestion_stored_before_texts_shows_its_notes_as_stored(june_suggestions):
    s = june_suggestions["team-a-training"]
    s.notes = ["an English note of an older portal"]
    s.figures = {**s.figures, "basis": "guarantee = an older sentence"}
    with translation.override("zh-hans"):
        assert s.localized_notes == ["an English note of an older portal"]
        assert s.localized_figures["basis"] == "guarantee = an older sentence"
