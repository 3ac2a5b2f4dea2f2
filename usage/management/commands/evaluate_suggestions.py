"""``python manage.py evaluate_suggestions``: how the suggestions do against an equal split, the
seed's rule and the best plan in hindsight (``usage/evaluate.py``), suggested from one period
and scored on the next.

- ``--cluster NAME``: walks forward over every month of the cluster's stored data
  (``usage/backtest.backtest_walk``: suggest from one month, score the next), stores the rows
  the suggestions page shows and prints them.
- Without it: replays the openb GPU trace through the CSV path (``convert_trace`` +
  ``import_usage``, which rolls up) on a cluster of its own, in one transaction that is rolled
  back (the database is left as it was). When the trace covers at least two whole calendar
  months it walks forward over them with the same backtest (``--walk months``); otherwise
  (or with ``--walk folds``) over rolling folds: fold ``k`` suggests from ``--train-days``
  days and scores the ``--test-days`` after them, each fold starting ``--test-days`` later.
"""

from __future__ import annotations

import csv
import tempfile
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamNamespace
from usage.backtest import backtest_period, backtest_walk, local_midnight
from usage.evaluate import POLICIES, Score, score_table
from usage.models import SuggestionBacktest, UsageSample
from usage.suggestions import month_end
from usage.trace import KINDS

DEFAULT_TRACE = (
    Path(__file__).resolve().parents[3] / "tests/data/alibaba-openb-2023/openb_gpu_pods.csv"
)
START = date(2025, 1, 1)  # second 0 of the trace is midnight of this day, in TIME_ZONE
STEP = 300
CLUSTER = "openb-eval"
GPU = "nvidia.com/gpu"
WALKS = ("auto", "months", "folds")


@dataclass
class Evaluation:
    """Scores per policy over every scored period (``periods``: first day, last day, scores)."""

    walk: str  # months or folds
    totals: dict[str, Score]
    periods: list[tuple[date, date, dict[str, Score]]] = field(default_factory=list)
    namespaces: int = 0
    samples: int = 0


class _Rollback(Exception):
    pass


def _trace_days(trace: Path) -> int:
    """Whole days the trace covers (its last pod deletion, in days from second 0)."""
    try:
        with trace.open(newline="") as f:
            return max(int(row["deletion_time"]) for row in csv.DictReader(f)) // 86_400
    except OSError as exc:
        raise CommandError(f"--trace: cannot read {trace}: {exc.strerror}") from None
    except (KeyError, ValueError) as exc:
        raise CommandError(f"--trace: not an openb pod list ({exc})") from None


def whole_months(first: date, days: int) -> list[date]:
    """First days of the calendar months wholly inside the ``days`` days from ``first``."""
    last = first + timedelta(days=days - 1)
    month = first if first.day == 1 else month_end(first) + timedelta(days=1)
    months = []
    while month_end(month) <= last:
        months.append(month)
        month = month_end(month) + timedelta(days=1)
    return months


def run_evaluation(
    *,
    trace: Path = DEFAULT_TRACE,
    capacity: Decimal = Decimal(48),
    max_cap_share: Decimal = Decimal("0.5"),
    teams_per_kind: int = 2,
    walk: str = "auto",
    from_day: int = 107,
    train_days: int = 21,
    test_days: int = 7,
    folds: int = 3,
) -> Evaluation:
    """Replay, suggest and score inside a transaction that is rolled back."""
    last_day = _trace_days(trace)
    months = whole_months(START, last_day)
    if walk == "auto":
        walk = "months" if len(months) >= 2 else "folds"
    if walk == "months" and len(months) < 2:
        raise CommandError(
            f"--walk months: the trace covers {len(months)} whole month(s) from {START}; "
            "two are needed (use --walk folds)"
        )
    if walk == "folds" and from_day + train_days + folds * test_days > last_day:
        raise CommandError(
            f"--from-day {from_day} + {train_days + folds * test_days} days ends after the last "
            f"whole day of the trace ({last_day}): lower --from-day, --train-days, --test-days "
            "or --folds"
        )
    result: Evaluation | None = None
    try:
        with transaction.atomic():
            cluster = _replay_cluster(capacity=capacity, max_cap_share=max_cap_share)
            namespaces = _namespaces(cluster, teams_per_kind=teams_per_kind)
            if walk == "months":
                first_day = (months[0] - START).days
                days = (month_end(months[-1]) - months[0]).days + 1
                _import(trace, first_day=first_day, days=days, teams_per_kind=teams_per_kind)
                result = _walk_months(cluster)
            else:
                days = train_days + folds * test_days
                _import(trace, first_day=from_day, days=days, teams_per_kind=teams_per_kind)
                first = START + timedelta(days=from_day)
                result = _walk_folds(cluster, first, train_days, test_days, folds)
            result.namespaces = namespaces
            raise _Rollback
    except _Rollback:
        pass
    assert result is not None
    return result


def _replay_cluster(*, capacity: Decimal, max_cap_share: Decimal) -> Cluster:
    if Cluster.objects.filter(name=CLUSTER).exists():
        raise CommandError(f"a cluster named {CLUSTER} exists already; the evaluation needs it")
    gpu, _ = Resource.objects.get_or_create(
        name=GPU, defaults={"display_name": "GPU", "kind": Resource.Kind.GPU, "unit": "GPU"}
    )
    cluster = Cluster.objects.create(name=CLUSTER, max_cap_share=max_cap_share)
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=capacity)
    return cluster


def _namespaces(cluster: Cluster, *, teams_per_kind: int) -> int:
    n = 0
    for kind in sorted(set(KINDS.values())):
        for k in range(teams_per_kind):
            name = f"openb-{kind}-{k}"
            team, _ = Team.objects.get_or_create(slug=name, defaults={"name": name})
            TeamNamespace.objects.create(team=team, cluster=cluster, name=name, workload_class=kind)
            n += 1
    return n


def _import(trace: Path, *, first_day: int, days: int, teams_per_kind: int) -> None:
    with tempfile.NamedTemporaryFile("w+", suffix=".csv") as csv_file:
        call_command(
            "convert_trace",
            str(trace),
            "--cluster",
            CLUSTER,
            "--start",
            datetime.combine(START, datetime.min.time(), ZoneInfo(settings.TIME_ZONE)).isoformat(),
            "--from-day",
            str(first_day),
            "--days",
            str(days),
            "--prefix",
            "openb",
            "--teams-per-kind",
            str(teams_per_kind),
            "--step",
            str(STEP),
            "-o",
            csv_file.name,
            stderr=StringIO(),
        )
        call_command("import_usage", csv_file.name, stdout=StringIO(), stderr=StringIO())


def _samples(cluster: Cluster, first: date, last: date) -> int:
    return UsageSample.objects.filter(
        team_namespace__cluster=cluster,
        timestamp__gte=local_midnight(first),
        timestamp__lt=local_midnight(last + timedelta(days=1)),
    ).count()


def score_of(row: SuggestionBacktest) -> Score:
    """A stored row as the Score it was made from (unit-hours and cost)."""
    return Score(
        **{name: float(getattr(row, name)) for name in SuggestionBacktest.SCORE_FIELDS},
        namespaces=row.namespaces,
    )


def stored_scores(
    cluster: Cluster, months: list[date]
) -> dict[str, list[tuple[date, dict[str, Score]]]]:
    """The stored rows of ``months``: resource name -> [(month, policy -> score)], in order."""
    by_resource: dict[str, dict[date, dict[str, Score]]] = {}
    rows = SuggestionBacktest.objects.filter(cluster=cluster, month__in=months).select_related(
        "resource"
    )
    for row in rows.order_by("resource__name", "month"):
        month = by_resource.setdefault(row.resource.name, {}).setdefault(row.month, {})
        month[row.policy] = score_of(row)
    return {
        resource: [
            (m, {p: scores[p] for p in POLICIES if p in scores}) for m, scores in by_month.items()
        ]
        for resource, by_month in by_resource.items()
    }


def _walk_months(cluster: Cluster) -> Evaluation:
    months = backtest_walk(cluster=cluster)
    evaluation = Evaluation(walk="months", totals={p: Score() for p in POLICIES})
    for month, scores in stored_scores(cluster, months).get(GPU, []):
        evaluation.periods.append((month, month_end(month), scores))
        evaluation.samples += _samples(cluster, month, month_end(month))
        for p in POLICIES:
            evaluation.totals[p].add(scores[p])
    return evaluation


def _walk_folds(
    cluster: Cluster, first: date, train_days: int, test_days: int, folds: int
) -> Evaluation:
    evaluation = Evaluation(walk="folds", totals={p: Score() for p in POLICIES})
    for k in range(folds):
        train_start = first + timedelta(days=k * test_days)
        test_start = train_start + timedelta(days=train_days)
        test_end = test_start + timedelta(days=test_days - 1)
        results = backtest_period(
            cluster=cluster,
            train=(train_start, test_start - timedelta(days=1)),
            scored=(test_start, test_end),
        )
        scores = next((r.scores for r in results if r.resource.name == GPU), None)
        if scores is None:
            continue
        evaluation.periods.append((test_start, test_end, scores))
        evaluation.samples += _samples(cluster, test_start, test_end)
        for p in POLICIES:
            evaluation.totals[p].add(scores[p])
    return evaluation


class Command(BaseCommand):
    help = (
        "Score suggestions against the equal split, the seed's rule and the best plan in "
        "hindsight: on a cluster's stored months (--cluster, stored for /suggestions/), or on "
        "the openb trace (rolled back)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--cluster",
            help="walk over every month of this cluster's stored data and store the backtest",
        )
        parser.add_argument("--trace", default=str(DEFAULT_TRACE), help="openb pod list CSV")
        parser.add_argument("--capacity", type=Decimal, default=Decimal(48), help="GPUs")
        parser.add_argument("--max-cap-share", type=Decimal, default=Decimal("0.5"))
        parser.add_argument("--teams-per-kind", type=int, default=2)
        parser.add_argument(
            "--walk",
            choices=WALKS,
            default="auto",
            help="trace: whole months (when it covers two or more: auto) or rolling folds",
        )
        parser.add_argument("--from-day", type=int, default=107, help="folds: first trace day")
        parser.add_argument("--train-days", type=int, default=21, help="folds")
        parser.add_argument("--test-days", type=int, default=7, help="folds")
        parser.add_argument("--folds", type=int, default=3, help="folds")

    def handle(self, *args, **options) -> None:
        if options["cluster"] is not None:
            self._cluster(options["cluster"])
            return
        for name in ("teams_per_kind", "train_days", "test_days", "folds"):
            if options[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')}: must be at least 1")
        if options["from_day"] < 0:
            raise CommandError("--from-day: must be at least 0")
        if options["capacity"] <= 0:
            raise CommandError("--capacity: must be positive")
        if not 0 < options["max_cap_share"] <= 1:
            raise CommandError("--max-cap-share: must be in (0, 1]")
        evaluation = run_evaluation(
            trace=Path(options["trace"]),
            capacity=options["capacity"],
            max_cap_share=options["max_cap_share"],
            teams_per_kind=options["teams_per_kind"],
            walk=options["walk"],
            from_day=options["from_day"],
            train_days=options["train_days"],
            test_days=options["test_days"],
            folds=options["folds"],
        )
        if evaluation.walk == "months":
            how = "each whole month scored on the suggestions from the month before"
        else:
            how = (
                f"{options['folds']} folds of {options['train_days']} days suggested from, "
                f"{options['test_days']} days scored"
            )
        self.stdout.write(
            f"openb trace, {evaluation.namespaces} namespaces, capacity "
            f"{options['capacity']} GPUs, max cap share {options['max_cap_share']}; {how} "
            "(GPU-hours; cost as the suggestions price it)"
        )
        for start, end, scores in evaluation.periods:
            self.stdout.write(f"\n{start} to {end}\n{score_table(scores)}")
        label = "all months" if evaluation.walk == "months" else "all folds"
        self.stdout.write(f"\n{label}\n{score_table(evaluation.totals)}")

    def _cluster(self, name: str) -> None:
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise CommandError(f"--cluster: no cluster named {name!r}")
        months = backtest_walk(cluster=cluster)
        if not months:
            self.stdout.write(
                f"{cluster.name}: no month over with samples, and samples in the month before: "
                "nothing to backtest"
            )
            return
        units = dict(Resource.objects.values_list("name", "unit"))
        self.stdout.write(
            f"{cluster.name}: {len(months)} month(s) backtested and stored, {months[0]:%Y-%m} "
            f"to {months[-1]:%Y-%m}, each scored on the suggestions from the month before "
            "(unit-hours; cost as the suggestions price it)"
        )
        for resource, rows in stored_scores(cluster, months).items():
            unit = units.get(resource) or resource
            totals = {p: Score() for p in POLICIES}
            for month, scores in rows:
                self.stdout.write(f"\n{month:%Y-%m} {resource}\n{score_table(scores, unit=unit)}")
                for p, score in scores.items():
                    totals[p].add(score)
            self.stdout.write(f"\nall months {resource}\n{score_table(totals, unit=unit)}")
