"""The portal's application role as deployed on PostgreSQL: a role with exactly the grants of
``deploy/postgres/audit-grants.sql`` (use of every table, no DDL, the audit log append-only)."""

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

GRANTS_SQL = Path(__file__).resolve().parents[2] / "deploy" / "postgres" / "audit-grants.sql"


def grant_statements(role: str) -> list[str]:
    """The documented grants, for ``role`` instead of portal_app."""
    return [
        part.replace("portal_app", role)
        for part in GRANTS_SQL.read_text().split(";")
        if part.strip() and not all(s.startswith("--") for s in part.strip().splitlines())
    ]


@contextmanager
def as_application_role() -> Iterator[str]:
    """The test's connection acts as a new role with the documented grants until the block
    ends (the role goes with the test's transaction)."""
    role = f"portal_app_test_{secrets.token_hex(4)}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")
        for statement in grant_statements(role):
            cursor.execute(statement)
        cursor.execute(f"SET LOCAL ROLE {role}")
    try:
        yield role
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
