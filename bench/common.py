"""What every benchmark shares: the figure record, the throw-away database, Django set-up,
percentiles and the per-benchmark result file that `python -m bench` gathers into one table.

A figure is one row of that table:

    {"figure": "sync 500 ns: first sync", "value": 1.71, "unit": "s",
     "baseline": 1.19, "baseline_label": "plain-HTTP applies", "ratio": 1.44,
     "database": "postgresql"}

`ratio` is value / baseline, both measured in the same run (None when a figure has no
baseline, such as a query count read against its own smaller size).
"""

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "var" / "bench"
# Set by `python -m bench` for each benchmark it runs: where that benchmark writes its figures.
FIGURES_ENV = "BENCH_FIGURES_OUT"


def quick() -> bool:
    return os.environ.get("BENCH_QUICK", "") not in ("", "0")


def figure(
    name: str,
    value: float,
    unit: str,
    *,
    baseline: float | None = None,
    baseline_label: str = "",
    database: str = "",
    note: str = "",
) -> dict:
    ratio = None
    if baseline is not None and baseline > 0:
        ratio = float(f"{value / baseline:.4g}")  # four significant digits, small or large
    return {
        "figure": name,
        "value": _round(value),
        "unit": unit,
        "baseline": None if baseline is None else _round(baseline),
        "baseline_label": baseline_label,
        "ratio": ratio,
        "database": database,
        "note": note,
    }


def _round(value: float) -> float:
    if isinstance(value, int):
        return value
    return round(value, 4 if abs(value) < 1 else 2)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0..100) of a non-empty list."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


def write_figures(name: str, figures: list[dict], details: dict | None = None) -> Path:
    """Write this benchmark's figures where `python -m bench` reads them (else to
    var/bench/NAME.figures.json) and print them as a small table."""
    out = Path(os.environ.get(FIGURES_ENV) or OUT_DIR / f"{name}.figures.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"benchmark": name, "figures": figures, "details": details or {}}, indent=2)
        + "\n"
    )
    print(format_table(figures))
    return out


def write_skipped(name: str, reason: str) -> None:
    """Say that this benchmark could not run here (a store it needs is missing), and why."""
    out = Path(os.environ.get(FIGURES_ENV) or OUT_DIR / f"{name}.figures.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": name, "figures": [], "skipped": reason}) + "\n")
    print(f"{name}: skipped: {reason}")


def format_value(value, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        text = f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    else:
        text = f"{int(value):,}"
    return f"{text} {unit}".strip()


def format_table(figures: list[dict]) -> str:
    header = ("figure", "value", "baseline", "ratio", "database")
    rows = [header]
    for fig in figures:
        baseline = format_value(fig["baseline"], fig["unit"])
        if fig.get("baseline_label") and fig["baseline"] is not None:
            baseline = f"{baseline} ({fig['baseline_label']})"
        rows.append(
            (
                fig["figure"],
                format_value(fig["value"], fig["unit"]),
                baseline,
                "-" if fig["ratio"] is None else f"{fig['ratio']:.2f}",
                fig.get("database") or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            cell.ljust(widths[i]) if i in (0, 2, 4) else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --- databases ------------------------------------------------------------------------------


def postgres_server_url() -> str | None:
    """The PostgreSQL server to benchmark on: BENCH_DATABASE_URL, else DATABASE_URL when it is
    PostgreSQL; None when neither names one."""
    for name in ("BENCH_DATABASE_URL", "DATABASE_URL"):
        url = os.environ.get(name, "")
        if url.startswith(("postgres://", "postgresql://")):
            return url
    return None


def with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@contextlib.contextmanager
def throwaway_database(prefix: str, *, require_postgres: bool = False) -> Iterator[tuple[str, str]]:
    """A database that exists for the benchmark only: a new PostgreSQL database on the
    configured server (dropped afterwards), else a SQLite file in a temporary directory.
    Yields (DATABASE_URL, "postgresql" | "sqlite")."""
    server = postgres_server_url()
    if server is None and require_postgres:
        server = "postgres://postgres@127.0.0.1:5432/postgres"
    if server is None:
        with tempfile.TemporaryDirectory(prefix=f"{prefix}-") as tmp:
            yield f"sqlite:///{tmp}/bench.sqlite3", "sqlite"
        return
    import psycopg

    admin = psycopg.connect(with_db(server, "postgres"), autocommit=True, connect_timeout=5)
    # BENCH_DATABASE_PREFIX: where a shared server allows only databases of some names.
    name = f"{os.environ.get('BENCH_DATABASE_PREFIX', '')}{prefix}_{os.getpid()}_{int(time.time())}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_db(server, name), "postgresql"
    finally:
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def analyze() -> None:
    """Statistics for the planner after a benchmark's data is built, as autovacuum gathers them
    within a minute of such writes on a running server (PostgreSQL; nothing on SQLite)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def setup_django(
    db_url: str, *, var_dir: str | None = None, settings: str = "portal.settings"
) -> None:
    """Point Django at the benchmark's database and migrate it. The broker stays whatever the
    benchmark sets before calling this (none: tasks are not sent)."""
    os.environ["DATABASE_URL"] = db_url
    if var_dir:
        os.environ["PORTAL_VAR_DIR"] = var_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
