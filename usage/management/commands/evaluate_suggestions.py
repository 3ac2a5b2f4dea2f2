"""``python manage.py evaluate_suggestions``: replay the openb GPU trace through the CSV path
(``convert_trace`` + ``import_usage``, which rolls up), suggest from the first weeks and score
the following week against the equal split, the seed's rule and the best plan in hindsight
(``usage/evaluate.py``).

Rolling origin: fold ``k`` suggests from ``--train-days`` days and scores the ``--test-days``
after them; each fold starts ``--test-days`` later. Everything runs in one transaction that is
rolled back: the database is left as it was.
"""

from __future__ import annotations

import csv
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamNamespace
from usage.evaluate import (
    POLICIES,
    Score,
    plan_equal_split,
    plan_hindsight,
    plan_seed_rule,
    plan_suggested,
    score_plan,
    score_table,
)
from usage.models import UsageSample
from usage.selectors import usage_daily_for
from usage.suggest import AllocationUsage, Period
from usage.trace import KINDS

DEFAULT_TRACE = (
    Path(__file__).resolve().parents[3] / "tests/data/alibaba-openb-2023/openb_gpu_pods.csv"
)
START = datetime(2025, 1, 1, tzinfo=UTC)  # second 0 of the trace
STEP = 300
CLUSTER = "openb-eval"
GPU = "nvidia.com/gpu"


@dataclass
class Evaluation:
    totals: dict[str, Score]
    folds: list[tuple[date, date, dict[str, Score]]] = field(default_factory=list)
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


def run_evaluation(
    *,
    trace: Path = DEFAULT_TRACE,
    capacity: Decimal = Decimal(48),
    max_cap_share: Decimal = Decimal("0.5"),
    teams_per_kind: int = 2,
    from_day: int = 107,
    train_days: int = 21,
    test_days: int = 7,
    folds: int = 3,
) -> Evaluation:
    """Replay, suggest and score inside a transaction that is rolled back."""
    result: Evaluation | None = None
    try:
        with transaction.atomic():
            result = _evaluate(
                trace=trace,
                capacity=capacity,
                max_cap_share=max_cap_share,
                teams_per_kind=teams_per_kind,
                from_day=from_day,
                train_days=train_days,
                test_days=test_days,
                folds=folds,
            )
            raise _Rollback
    except _Rollback:
        pass
    assert result is not None
    return result


def _evaluate(
    *, trace, capacity, max_cap_share, teams_per_kind, from_day, train_days, test_days, folds
):
    if Cluster.objects.filter(name=CLUSTER).exists():
        raise CommandError(f"a cluster named {CLUSTER} exists already; the evaluation needs it")
    gpu, _ = Resource.objects.get_or_create(
        name=GPU, defaults={"display_name": "GPU", "kind": Resource.Kind.GPU, "unit": "GPU"}
    )
    cluster = Cluster.objects.create(name=CLUSTER, max_cap_share=max_cap_share)
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=capacity)
    for kind in sorted(set(KINDS.values())):
        for n in range(teams_per_kind):
            name = f"openb-{kind}-{n}"
            team, _ = Team.objects.get_or_create(slug=name, defaults={"name": name})
            TeamNamespace.objects.create(team=team, cluster=cluster, name=name, workload_class=kind)

    days = train_days + (folds * test_days)
    last_day = _trace_days(trace)
    if from_day + days > last_day:
        raise CommandError(
            f"--from-day {from_day} + {days} days ends after the last whole day of the trace "
            f"({last_day}): lower --from-day, --train-days, --test-days or --folds"
        )
    with tempfile.NamedTemporaryFile("w+", suffix=".csv") as csv_file:
        call_command(
            "convert_trace",
            str(trace),
            "--cluster",
            CLUSTER,
            "--start",
            START.isoformat(),
            "--from-day",
            str(from_day),
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

    namespaces = list(TeamNamespace.objects.filter(cluster=cluster).order_by("name"))
    first = (START + timedelta(days=from_day)).date()
    evaluation = Evaluation(totals={p: Score() for p in POLICIES}, namespaces=len(namespaces))
    hours = Decimal(STEP) / 3600
    for k in range(folds):
        train_start = first + timedelta(days=k * test_days)
        test_start = train_start + timedelta(days=train_days)
        test_end = test_start + timedelta(days=test_days)
        rows = usage_daily_for(
            cluster=cluster, start=train_start, end=test_start - timedelta(days=1)
        )
        items = [
            AllocationUsage(
                namespace=ns.name,
                resource=GPU,
                workload_class=ns.workload_class,
                resource_kind="gpu",
                current_guarantee=Decimal(0),
                current_cap=Decimal(0),
                days=[r for r in rows if r.namespace == ns.name],
                unit="GPU",
            )
            for ns in namespaces
        ]
        period = Period(start=train_start, end=test_start - timedelta(days=1), today=test_start)
        plans = {
            "equal split": plan_equal_split(items, capacity=capacity, max_cap_share=max_cap_share),
            "seed rule": plan_seed_rule(items, capacity=capacity, max_cap_share=max_cap_share),
            "suggested": plan_suggested(
                items, capacity=capacity, max_cap_share=max_cap_share, period=period
            ),
        }
        demand: dict[str, list[Decimal]] = {ns.name: [] for ns in namespaces}
        samples = UsageSample.objects.filter(
            team_namespace__cluster=cluster,
            timestamp__gte=datetime.combine(test_start, datetime.min.time(), tzinfo=UTC),
            timestamp__lt=datetime.combine(test_end, datetime.min.time(), tzinfo=UTC),
        ).values_list("team_namespace__name", "allocated", "pending")
        for name, allocated, pending in samples.iterator(chunk_size=5000):
            demand[name].append(allocated + pending)
            evaluation.samples += 1
        plans["best in hindsight"] = plan_hindsight(
            demand, capacity=capacity, max_cap_share=max_cap_share
        )
        scores = {p: score_plan(plans[p], demand, hours_per_sample=hours) for p in POLICIES}
        for p in POLICIES:
            evaluation.totals[p].add(scores[p])
        evaluation.folds.append((test_start, test_end - timedelta(days=1), scores))
    return evaluation


class Command(BaseCommand):
    help = (
        "Score suggestions on the openb trace against the equal split, the seed's rule and "
        "the best plan in hindsight."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--trace", default=str(DEFAULT_TRACE), help="openb pod list CSV")
        parser.add_argument("--capacity", type=Decimal, default=Decimal(48), help="GPUs")
        parser.add_argument("--max-cap-share", type=Decimal, default=Decimal("0.5"))
        parser.add_argument("--teams-per-kind", type=int, default=2)
        parser.add_argument("--from-day", type=int, default=107, help="first trace day used")
        parser.add_argument("--train-days", type=int, default=21)
        parser.add_argument("--test-days", type=int, default=7)
        parser.add_argument("--folds", type=int, default=3)

    def handle(self, *args, **options) -> None:
        for name in ("teams_per_kind", "train_days", "test_days", "folds"):
            if options[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')}: must be at least 1")
        if options["capacity"] <= 0:
            raise CommandError("--capacity: must be positive")
        if not 0 < options["max_cap_share"] <= 1:
            raise CommandError("--max-cap-share: must be in (0, 1]")
        evaluation = run_evaluation(
            trace=Path(options["trace"]),
            capacity=options["capacity"],
            max_cap_share=options["max_cap_share"],
            teams_per_kind=options["teams_per_kind"],
            from_day=options["from_day"],
            train_days=options["train_days"],
            test_days=options["test_days"],
            folds=options["folds"],
        )
        self.stdout.write(
            f"openb trace, {evaluation.namespaces} namespaces, capacity "
            f"{options['capacity']} GPUs, max cap share {options['max_cap_share']}; "
            f"{options['folds']} folds of {options['train_days']} days suggested from, "
            f"{options['test_days']} days scored (GPU-hours)"
        )
        for start, end, scores in evaluation.folds:
            self.stdout.write(f"\n{start} to {end}\n{score_table(scores)}")
        self.stdout.write(f"\nall folds\n{score_table(evaluation.totals)}")
