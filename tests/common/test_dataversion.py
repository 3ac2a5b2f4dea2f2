"""The data version changes with every committed write, whatever does it; equal readings mean
no write was committed in between; none to rely on inside a transaction or on SQLite."""

import os
import threading

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, connections, transaction

from common.dataversion import data_version
from quotas.models import Team

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql():
    if connection.vendor != "postgresql":
        assert data_version() is None  # the demo keeps nothing
        message = "the data version is PostgreSQL's record of transactions"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _moved(before: str) -> str:
    after = data_version()
    assert after is not None and after != before
    return after


def test_reading_leaves_it_alone_and_each_kind_of_write_moves_it():
    version = data_version()
    assert list(Team.objects.all()) == []
    assert data_version() == version
    team = Team.objects.create(slug="vision", name="Vision")
    version = _moved(version)
    Team.objects.filter(pk=team.pk).update(name="Computer vision")  # no save(), no signal
    version = _moved(version)
    Team.objects.bulk_create([Team(slug="speech", name="Speech")])
    version = _moved(version)
    User.objects.create(username="ana").groups.add(Group.objects.create(name="readers"))
    version = _moved(version)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE quotas_team SET description = 'raw' WHERE slug = 'speech'")
    version = _moved(version)
    Team.objects.filter(slug="speech").delete()
    _moved(version)


def test_inside_a_transaction_there_is_none_to_rely_on():
    assert data_version() is not None
    with transaction.atomic():
        assert data_version() is None


def test_a_version_read_before_another_connection_commits_is_never_read_again():
    seen = [data_version()]
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
    seen.append(data_version())  # written, not committed: the old data under this version
    assert not Team.objects.filter(slug="late").exists()
    release.set()
    assert done.wait(10)
    thread.join()
    assert Team.objects.filter(slug="late").exists()
    after = data_version()
    assert after not in seen
