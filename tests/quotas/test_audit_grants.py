"""check_audit_grants: the documented grants leave the application role unable to erase or
rewrite the audit log; the usual superuser-like role is reported."""

import io
import secrets

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper
from django.db.utils import ProgrammingError

from quotas.audit.chain import audit_verify
from quotas.audit.grants import audit_grants_check
from tests.support.db_roles import grant_statements

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="roles and grants are PostgreSQL's"
)


@pytest.fixture
def app_role(transactional_db):
    """A login role with exactly the documented grants, and a connection as that role."""
    name = f"portal_app_test_{secrets.token_hex(4)}"
    password = secrets.token_hex(16)
    statements = grant_statements(name)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        for statement in statements:
            cursor.execute(statement)
    wrapper = DatabaseWrapper(
        {**connection.settings_dict, "USER": name, "PASSWORD": password}, alias="app_role"
    )
    try:
        yield wrapper
    finally:
        wrapper.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP OWNED BY {name}")
            cursor.execute(f"DROP ROLE {name}")


@postgresql_only
def test_the_documented_grants_pass_the_check(app_role, admin, cluster):
    from tests.support.audit import append_events

    append_events(2, user=admin, target=cluster)
    report = audit_grants_check(app_role)
    assert report.problems == []
    assert report.ok and report.role.startswith("portal_app_test_")
    # And the database agrees: the role cannot empty, delete or rewrite the events.
    for sql in (
        "TRUNCATE quotas_auditevent",
        "DELETE FROM quotas_auditevent",
        "UPDATE quotas_auditevent SET comment = 'x'",
        "TRUNCATE quotas_auditchainhead",
        "ALTER TABLE quotas_auditevent DISABLE TRIGGER quotas_auditevent_append_only",
    ):
        with (
            pytest.raises(ProgrammingError, match=r"permission denied|must be owner"),
            app_role.cursor() as cursor,
        ):
            cursor.execute(sql)
    assert audit_verify().checked == 2


@postgresql_only
def test_the_default_role_is_reported(db):
    report = audit_grants_check(connection)
    assert not report.ok
    assert any("superuser" in p for p in report.problems)
    err = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("check_audit_grants", stderr=err)
    assert caught.value.returncode == 1
    assert "can erase or rewrite the audit log" in str(caught.value)
    assert "quotas_auditevent: " in err.getvalue()


@postgresql_only
def test_a_role_with_truncate_is_reported(app_role):
    name = app_role.settings_dict["USER"]
    with connection.cursor() as cursor:
        cursor.execute(f"GRANT TRUNCATE ON quotas_auditevent TO {name}")
    assert audit_grants_check(app_role).problems == [
        f"quotas_auditevent: {name} may TRUNCATE (revoke it)"
    ]


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite demo")
def test_sqlite_has_no_roles_to_check(db):
    out = io.StringIO()
    call_command("check_audit_grants", stdout=out)
    assert "not PostgreSQL: no roles to check" in out.getvalue()
