"""The data version moves with every committed write to the portal's data, whatever does it,
and only then; it never comes back to an earlier value."""

import os
import threading

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection, connections, transaction

from common.dataversion import (
    EXCLUDED,
    covered_tables,
    data_version,
    install_triggers,
    tracked_tables,
)
from quotas.models import Team

pytestmark = pytest.mark.django_db(transaction=True)


def _require_postgresql() -> None:
    if connection.vendor != "postgresql":
        message = "needs PostgreSQL: another connection's uncommitted write"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _moved(before: int | None) -> int:
    after = data_version()
    assert after is not None
    assert before is None or after > before
    return after


def test_every_table_of_the_portal_data_has_the_trigger():
    tables = tracked_tables()
    for table in (
        "approvals_quotarequest",
        "approvals_requestline",
        "quotas_allocation",
        "quotas_teammembership",
        "quotas_cluster",
        "portal_workerheartbeat",
        "auth_user",
        "auth_user_groups",
    ):
        assert table in tables
    assert not set(EXCLUDED) & set(tables)
    assert covered_tables() == set(tables)


def test_install_puts_back_a_missing_trigger_and_takes_it_from_an_excluded_table():
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute('DROP TRIGGER portal_data_changed ON "quotas_team"')
            cursor.execute(
                'CREATE TRIGGER portal_data_changed AFTER INSERT ON "portal_apitoken" '
                "FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed()"
            )
        else:
            cursor.execute('DROP TRIGGER "portal_data_changed_quotas_team_update"')
    assert "quotas_team" not in covered_tables()
    if connection.vendor == "postgresql":
        assert "portal_apitoken" in covered_tables()
    install_triggers()
    assert covered_tables() == set(tracked_tables())


def test_each_kind_of_write_moves_the_version_and_reading_does_not():
    version = _moved(None)
    team = Team.objects.create(slug="vision", name="Vision")
    version = _moved(version)
    assert list(Team.objects.all()) == [team]
    assert data_version() == version

    Team.objects.filter(pk=team.pk).update(name="Computer vision")
    version = _moved(version)
    Team.objects.bulk_create([Team(slug="speech", name="Speech")])
    version = _moved(version)
    user = User.objects.create(username="ana")
    version = _moved(version)
    user.groups.add(Group.objects.create(name="readers"))  # group, then the link
    version = _moved(version)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE quotas_team SET description = 'raw' WHERE slug = 'speech'")
    version = _moved(version)
    Team.objects.filter(slug="speech").delete()
    _moved(version)


def test_one_transaction_moves_it_once_whatever_it_writes():
    before = data_version()
    with transaction.atomic():
        Team.objects.bulk_create([Team(slug=f"t{i}", name=f"T{i}") for i in range(50)])
        Team.objects.update(description="x")
        if connection.vendor == "postgresql":  # SQLite moves it per row written
            with connection.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the commit-time triggers now
                cursor.execute(
                    "SELECT relname, n_tup_ins + n_tup_upd FROM pg_stat_xact_user_tables "
                    "WHERE relname IN ('portal_dataversion', 'portal_data_change')"
                )
                # 100 rows written in two statements: noted once, the version moved once
                assert dict(cursor.fetchall()) == {"portal_data_change": 1, "portal_dataversion": 1}
    _moved(before)


def test_a_rolled_back_write_leaves_it_alone():
    before = data_version()
    with pytest.raises(RuntimeError), transaction.atomic():
        Team.objects.create(slug="gone", name="Gone")
        raise RuntimeError
    assert data_version() == before


def test_inside_a_transaction_there_is_none_to_rely_on():
    assert data_version() is not None
    with transaction.atomic():
        assert data_version() is None


def test_another_connection_sees_the_new_version_exactly_with_its_data():
    _require_postgresql()
    before = data_version()
    written, release, done = threading.Event(), threading.Event(), threading.Event()

    def writer():
        try:
            with transaction.atomic():
                Team.objects.create(slug="late", name="Late")
                written.set()
                release.wait(10)
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    assert written.wait(10)
    assert data_version() == before  # written, not committed: neither data nor version
    assert not Team.objects.filter(slug="late").exists()
    release.set()
    assert done.wait(10)
    thread.join()
    assert Team.objects.filter(slug="late").exists()
    _moved(before)


def test_never_back_to_an_earlier_value_after_the_tables_are_emptied():
    Team.objects.create(slug="vision", name="Vision")
    before = data_version()
    call_command("flush", interactive=False, verbosity=0)
    after_flush = data_version()
    assert after_flush is None or after_flush > before
    Team.objects.create(slug="vision", name="Vision")
    assert data_version() > before
