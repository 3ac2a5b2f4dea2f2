"""CSV import of usage history: good rows kept, bad rows reported with line and field,
idempotent re-import, streamed in batches, progress on a terminal."""

import io
import re
import tracemalloc
from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from usage import csv_copy, csv_import
from usage.csv_import import CsvHeaderError, usage_import_csv
from usage.models import UsageDaily, UsageSample

HEADER = "timestamp,cluster,namespace,resource,allocated,utilization,pending,wait_seconds\n"


def write(tmp_path, text, name="usage.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


GOOD_AND_BAD = HEADER + (
    "2025-03-01T00:00:00Z,demo,team-a-training,nvidia.com/gpu,4,55.5,2,300\n"  # line 2
    "2025-03-01T00:05:00+00:00,demo,team-a-training,nvidia.com/gpu,6,,,\n"  # line 3
    "yesterday,demo,team-a-training,nvidia.com/gpu,4,,,\n"  # line 4: timestamp
    "2025-03-01T00:10:00Z,demo,team-x,nvidia.com/gpu,4,,,\n"  # line 5: namespace
    "2025-03-01T00:10:00Z,nowhere,team-a-training,nvidia.com/gpu,4,,,\n"  # line 6: cluster
    "2025-03-01T00:10:00Z,demo,team-a-training,amd.com/gpu,4,,,\n"  # line 7: resource
    "2025-03-01T00:10:00Z,demo,team-a-training,nvidia.com/gpu,-1,,,\n"  # line 8: allocated
    "2025-03-01T00:10:00Z,demo,team-a-training,nvidia.com/gpu,4,101,,\n"  # line 9: utilization
    "2025-03-01T00:10:00Z,demo,team-a-training,nvidia.com/gpu,4,,x,\n"  # line 10: pending
    "2025-03-01T00:10:00Z,demo,team-a-training,nvidia.com/gpu,4,,,-5\n"  # line 11: wait
    "2025-03-01T00:10:00Z,demo,team-b-inference,nvidia.com/gpu,,,,\n"  # line 12: allocated
    "2025-03-01T00:10:00,demo,team-b-inference,nvidia.com/gpu,1.5,,,\n"  # line 13: naive = UTC
)


@pytest.mark.django_db
def test_good_rows_are_kept_and_bad_ones_reported_with_line_and_field(
    tmp_path, alloc_a, alloc_b, capsys
):
    path = write(tmp_path, GOOD_AND_BAD)
    with pytest.raises(CommandError, match="9 bad rows"):
        call_command("import_usage", path)
    out, err = capsys.readouterr()
    assert "12 rows read, 3 samples imported, 9 bad rows" in out
    lines = err.strip().splitlines()
    assert lines[0] == "line 4: timestamp: 'yesterday' is not an ISO 8601 time"
    assert [line.split(":")[0:2] for line in lines] == [
        ["line 4", " timestamp"],
        ["line 5", " namespace"],
        ["line 6", " cluster"],
        ["line 7", " resource"],
        ["line 8", " allocated"],
        ["line 9", " utilization"],
        ["line 10", " pending"],
        ["line 11", " wait_seconds"],
        ["line 12", " allocated"],
    ]
    assert "line 9: utilization: 101 must be between 0 and 100" in err
    assert "line 12: allocated: is required" in err
    first = UsageSample.objects.get(timestamp=datetime(2025, 3, 1, tzinfo=UTC))
    assert (first.allocated, first.utilization, first.pending, first.wait_seconds) == (
        4,
        55.5,
        2,
        300,
    )
    assert first.source == "csv"
    naive = UsageSample.objects.get(team_namespace=alloc_b.team_namespace)
    assert naive.timestamp == datetime(2025, 3, 1, 0, 10, tzinfo=UTC)
    # The imported day is rolled up.
    assert UsageDaily.objects.get(team_namespace=alloc_a.team_namespace).peak == 6


@pytest.mark.django_db
def test_reimport_replaces_instead_of_adding(tmp_path, alloc_a):
    rows = HEADER + "".join(
        f"2025-03-01T00:{m:02d}:00Z,demo,team-a-training,nvidia.com/gpu,{m % 7},,,\n"
        for m in range(0, 60, 5)
    )
    path = write(tmp_path, rows)
    call_command("import_usage", path)
    call_command("import_usage", path)
    assert UsageSample.objects.count() == 12
    corrected = write(
        tmp_path,
        HEADER + "2025-03-01T00:00:00Z,demo,team-a-training,nvidia.com/gpu,9,,,\n",
        "fix.csv",
    )
    call_command("import_usage", corrected)
    assert UsageSample.objects.count() == 12
    assert UsageDaily.objects.get(day=date(2025, 3, 1)).peak == 9


@pytest.mark.django_db
def test_header_errors_name_the_column(tmp_path, alloc_a):
    with pytest.raises(CommandError, match="column allocated missing from the header"):
        call_command("import_usage", write(tmp_path, "timestamp,cluster,namespace,resource\n"))
    with pytest.raises(CommandError, match="the file is empty"):
        call_command("import_usage", write(tmp_path, ""))
    with pytest.raises(CommandError, match="file: cannot open"):
        call_command("import_usage", str(tmp_path / "missing.csv"))


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.django_db
def test_progress_is_shown_on_a_terminal_only(tmp_path, alloc_a, monkeypatch):
    monkeypatch.setattr(csv_import, "BATCH", 5)  # row by row: after every 5 rows
    monkeypatch.setattr(csv_copy, "CHUNK", 200)  # COPY (PostgreSQL): after every 200 characters
    rows = HEADER + "".join(
        f"2025-03-01T00:{m:02d}:00Z,demo,team-a-training,nvidia.com/gpu,1,,,\n" for m in range(20)
    )
    path = write(tmp_path, rows)
    terminal = FakeTerminal()
    call_command("import_usage", path, stdout=terminal)
    shown = terminal.getvalue()
    assert re.search(r"\r([5-9]|1[0-9]) rows ", shown) and shown.count("\r") >= 4, shown
    assert "\r20 rows 100%" in shown
    plain = io.StringIO()
    call_command("import_usage", path, stdout=plain)
    assert "\r" not in plain.getvalue()


def _rows(n: int):
    yield HEADER
    start = datetime(2025, 3, 1, tzinfo=UTC)
    for i in range(n):
        when = (start + timedelta(minutes=5 * i)).isoformat()
        yield f"{when},demo,team-a-training,nvidia.com/gpu,{i % 9},{i % 100},0,\n"


@pytest.mark.django_db
def test_import_streams_in_batches_with_bounded_memory(alloc_a, monkeypatch):
    monkeypatch.setattr(csv_import, "BATCH", 500)

    def peak_of(n: int) -> int:
        UsageSample.objects.all().delete()
        tracemalloc.start()
        result = usage_import_csv(stream=_rows(n), rollup=False)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert result.imported == n
        return peak

    small, large = peak_of(500), peak_of(5_000)
    # Ten times the rows, about the same memory: one batch at a time.
    assert large < small * 2, (small, large)
    assert UsageSample.objects.count() == 5_000


def test_a_header_without_required_columns_is_refused():
    with pytest.raises(CsvHeaderError, match="column cluster, allocated missing"):
        usage_import_csv(stream=io.StringIO("timestamp,namespace,resource\n"))
