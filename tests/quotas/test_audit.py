"""The audit log: hash chain, append-only triggers, verification, concurrency and CSV export."""

import csv
import datetime
import importlib
import io
import itertools
import json
import logging
import os
import stat
import subprocess
import sys
import threading
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, connections, transaction
from django.db.migrations.loader import MigrationLoader
from django.urls import reverse

from quotas.audit.anchors import audit_anchor_write, audit_anchors_read
from quotas.audit.chain import (
    CSV_HEADER,
    GENESIS_HASH,
    AuditVerification,
    audit_event_hash,
    audit_event_mac,
    audit_mac_key,
    audit_record,
    audit_verify,
)
from quotas.models.audit import AuditChainHead, AuditEvent
from quotas.services import allocation_set
from quotas.tasks import anchor_audit_log
from tests.support.audit import append_events

ROOT = Path(__file__).resolve().parents[2]

migration = importlib.import_module("quotas.migrations.0003_audit_chain")
mac_migration = importlib.import_module("quotas.migrations.0008_audit_event_mac")


@contextmanager
def append_only_suspended():
    """Lift the append-only triggers in the test's transaction, to tamper as an attacker would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "ALTER TABLE quotas_auditevent DISABLE TRIGGER quotas_auditevent_append_only"
            )
            try:
                yield cursor
            finally:
                cursor.execute(
                    "ALTER TABLE quotas_auditevent ENABLE TRIGGER quotas_auditevent_append_only"
                )
        else:
            for statement in migration.APPEND_ONLY_SQL["sqlite"][1]:
                cursor.execute(statement)
            try:
                yield cursor
            finally:
                for statement in migration.APPEND_ONLY_SQL["sqlite"][0]:
                    cursor.execute(statement)


def run_mac_migration() -> None:
    state = MigrationLoader(connection).project_state(("quotas", "0008_audit_event_mac"))
    with connection.cursor() as cursor:
        # What the migration uses of its schema editor, inside the test's transaction.
        editor = SimpleNamespace(connection=connection, execute=cursor.execute)
        mac_migration.mac_existing_events(state.apps, editor)


def tamper(sql: str, params: list) -> None:
    with append_only_suspended() as cursor:
        cursor.execute(sql, params)


SET_AFTER_SQL = {
    "postgresql": "UPDATE quotas_auditevent SET after = %s::jsonb WHERE seq = %s",
    "sqlite": "UPDATE quotas_auditevent SET after = %s WHERE seq = %s",
}
HASHED_FIELDS = (
    "seq",
    "prev_hash",
    "created_at",
    "actor_id",
    "actor_username",
    "action",
    "target_type",
    "target_id",
    "target_repr",
    "before",
    "after",
    "comment",
)


@pytest.mark.django_db
class TestChain:
    def test_many_appends_make_one_valid_chain(self, admin, cluster):
        events = append_events(130, user=admin, target=cluster)

        result = audit_verify(batch_size=16)  # several pages, the last one partial

        assert result.ok and result.checked == 130 and result.first_broken_seq is None
        assert [e.seq for e in events] == list(range(1, 131))
        assert events[0].prev_hash == GENESIS_HASH
        assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(events))
        head = AuditChainHead.objects.get()
        assert (head.last_seq, head.last_hash) == (130, events[-1].hash)

    def test_event_records_who_what_and_when(self, admin, cluster):
        event = audit_record(
            acting_user=admin,
            action="cluster.sync_mode",
            target=cluster,
            before={"cap": Decimal("1.5"), "at": datetime.date(2026, 1, 2)},
            after={"classes": ("a", "b")},
            comment="why",
        )
        stored = AuditEvent.objects.get(pk=event.pk)
        assert stored.actor_id == admin.pk and stored.actor_username == "admin"
        assert (stored.target_type, stored.target_id) == ("Cluster", str(cluster.pk))
        # Hashed as the JSON column gives it back, so the stored row verifies.
        assert stored.before == {"cap": "1.5", "at": "2026-01-02"}
        assert stored.after == {"classes": ["a", "b"]}
        assert stored.created_at == event.created_at
        assert audit_verify().ok

    def test_renaming_or_deleting_the_actor_keeps_the_chain_valid(self, admin, lead_a, cluster):
        append_events(3, user=lead_a, target=cluster)
        lead_a.username = "renamed"
        lead_a.save()
        lead_a.delete()  # the table refuses UPDATE, so the actor id is kept, not nulled

        assert audit_verify().ok
        assert AuditEvent.objects.filter(actor_username="lead-a").count() == 3

    def test_an_event_rolled_back_with_its_caller_leaves_no_gap(self, admin, cluster):
        append_events(2, user=admin, target=cluster)
        with pytest.raises(RuntimeError), transaction.atomic():
            audit_record(acting_user=admin, action="x", target=cluster)
            raise RuntimeError("caller failed")
        event = audit_record(acting_user=None, action="y", target=cluster)

        assert event.seq == 3 and event.actor_username == ""
        assert audit_verify().ok

    def test_a_missing_head_restarts_at_the_last_event(self, admin, cluster):
        append_events(2, user=admin, target=cluster)
        AuditChainHead.objects.all().delete()

        assert audit_record(acting_user=admin, action="z", target=cluster).seq == 3
        assert audit_verify().ok

    def test_migration_hash_is_the_live_one(self, admin, cluster):
        (event,) = append_events(1, user=admin, target=cluster)
        assert migration._event_hash(event, event.actor_username) == event.hash

    def test_migration_backfill_chains_events_written_before_the_chain(self, admin, cluster):
        events = append_events(5, user=admin, target=cluster)
        base = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        # Pre-chain rows: no seq, hashes or username; age order is the reverse of id order.
        with append_only_suspended() as cursor:
            for i, event in enumerate(events):
                cursor.execute(
                    "UPDATE quotas_auditevent SET seq = %s, prev_hash = '', hash = '',"
                    " actor_username = '', created_at = %s, mac = '', mac_key_id = ''"
                    " WHERE id = %s",
                    [1000 + i, base - datetime.timedelta(minutes=i), event.pk],
                )
            AuditChainHead.objects.all().delete()
            state = MigrationLoader(connection).project_state(("quotas", "0003_audit_chain"))
            migration.chain_existing_events(state.apps, SimpleNamespace(connection=connection))
        # 0006 lifts the triggers itself (and puts them back) to MAC the events it finds.
        run_mac_migration()

        assert audit_verify().ok
        oldest_first = list(AuditEvent.objects.order_by("seq").values_list("id", flat=True))
        assert oldest_first == [e.pk for e in reversed(events)]
        assert AuditChainHead.objects.get().last_seq == 5


@pytest.mark.django_db
class TestTamperingIsCaught:
    def test_editing_after_is_caught_at_that_event(self, admin, cluster):
        append_events(25, user=admin, target=cluster)
        tamper(SET_AFTER_SQL[connection.vendor], ['{"cap": 999}', 17])

        result = audit_verify(batch_size=10)

        assert not result.ok
        assert (result.first_broken_seq, result.checked) == (17, 16)
        assert result.reason == "event 17: hash does not match its contents (edited?)"

    def test_editing_and_rehashing_is_caught_at_the_next_event(self, admin, cluster):
        append_events(20, user=admin, target=cluster)
        event = AuditEvent.objects.get(seq=17)
        event.comment = "nothing to see"
        forged = audit_event_hash(**{f: getattr(event, f) for f in HASHED_FIELDS})
        tamper(
            "UPDATE quotas_auditevent SET comment = %s, hash = %s WHERE seq = 17",
            [event.comment, forged],
        )

        result = audit_verify()

        # The hash is right, but the MAC, which needs the key, is not.
        assert result.first_broken_seq == 17
        assert result.reason == "event 17: MAC does not match (rewritten without the key?)"

    def test_deleting_an_event_is_caught(self, admin, cluster):
        append_events(25, user=admin, target=cluster)
        tamper("DELETE FROM quotas_auditevent WHERE seq = %s", [20])

        result = audit_verify()

        assert (result.ok, result.first_broken_seq) == (False, 20)
        assert result.reason == "event 20: missing (deleted?)"

    def test_deleting_the_newest_events_is_caught_by_the_head(self, admin, cluster):
        append_events(10, user=admin, target=cluster)
        tamper("DELETE FROM quotas_auditevent WHERE seq > %s", [7])

        result = audit_verify()

        assert (result.first_broken_seq, result.reason) == (8, "event 8: missing (deleted?)")

    def test_deleting_the_oldest_event_is_caught(self, admin, cluster):
        append_events(3, user=admin, target=cluster)
        tamper("DELETE FROM quotas_auditevent WHERE seq = %s", [1])

        assert audit_verify().reason == "event 1: missing (deleted?)"


@pytest.mark.django_db
class TestAppendOnly:
    def test_orm_update_is_refused(self, admin, cluster):
        append_events(3, user=admin, target=cluster)
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
            AuditEvent.objects.filter(seq=2).update(comment="rewritten")
        event = AuditEvent.objects.get(seq=2)
        event.comment = "rewritten"
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
            event.save()
        assert audit_verify().ok

    def test_orm_delete_is_refused(self, admin, cluster):
        append_events(3, user=admin, target=cluster)
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
            AuditEvent.objects.get(seq=2).delete()
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
            AuditEvent.objects.filter(seq__gte=2).delete()
        assert AuditEvent.objects.count() == 3

    def test_emptying_the_log_is_refused_or_caught(self, admin, cluster):
        append_events(3, user=admin, target=cluster)
        if connection.vendor == "postgresql":
            with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
                AuditEvent.objects.all().delete()
        else:
            # SQLite lets rows go oldest first, as Django's test flush needs; the head notices.
            AuditEvent.objects.all().delete()
            assert audit_verify().reason == "event 1: missing (deleted?)"

    def test_tampering_helper_puts_the_triggers_back(self, admin, cluster):
        append_events(2, user=admin, target=cluster)
        tamper("UPDATE quotas_auditevent SET comment = 'x' WHERE seq = %s", [1])
        with pytest.raises(IntegrityError), transaction.atomic():
            AuditEvent.objects.filter(seq=2).update(comment="y")


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_one_chain(admin, cluster):
    threads, per_thread = 6, 15
    AuditChainHead.objects.all().delete()  # the appenders also race to create the head
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def appender(n: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                with transaction.atomic():
                    audit_record(
                        acting_user=admin,
                        action="allocation.set",
                        target=cluster,
                        after={"thread": n, "i": i},
                    )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=appender, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    total = threads * per_thread
    seqs = list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, total + 1))
    assert audit_verify() == AuditVerification(
        ok=True, checked=total, first_broken_seq=None, reason=""
    )


@pytest.mark.django_db
class TestVerifyCommand:
    def test_reports_ok_with_the_count(self, admin, cluster):
        append_events(4, user=admin, target=cluster)
        out = io.StringIO()
        call_command("verify_audit_chain", stdout=out)
        assert out.getvalue().strip() == "audit chain OK: 4 events, 0 anchors match"

    def test_an_empty_log_of_an_empty_portal_is_ok_but_says_no_anchor_was_compared(self):
        out, err = io.StringIO(), io.StringIO()
        call_command("verify_audit_chain", stdout=out, stderr=err)
        assert out.getvalue().strip() == "audit chain OK: 0 events, 0 anchors match"
        assert "no anchors to compare with" in err.getvalue()

    def test_reports_the_first_broken_event_and_exits_1(self, admin, cluster):
        append_events(5, user=admin, target=cluster)
        tamper("UPDATE quotas_auditevent SET target_repr = 'other' WHERE seq = %s", [3])

        with pytest.raises(CommandError) as caught:
            call_command("verify_audit_chain")

        assert str(caught.value) == (
            "audit chain BROKEN at event 3: hash does not match its contents (edited?)"
        )
        assert caught.value.returncode == 1


def read_csv(response) -> list[list[str]]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    body = b"".join(response.streaming_content).decode("utf-8")
    return list(csv.reader(io.StringIO(body)))


@pytest.mark.django_db
class TestCsvExport:
    url = reverse("audit-export")

    def test_admin_gets_every_event_in_chain_order(self, client, admin, cluster):
        events = append_events(3, user=admin, target=cluster)
        client.force_login(admin)

        rows = read_csv(client.get(self.url))

        assert rows[0] == CSV_HEADER
        assert [r[0] for r in rows[1:]] == ["1", "2", "3"]
        first = dict(zip(CSV_HEADER, rows[1], strict=True))
        assert first["actor_username"] == "admin" and first["action"] == "allocation.set"
        assert first["target_repr"] == str(cluster)
        assert first["before"] == '{"cap": 0}' and first["after"] == '{"cap": 1}'
        assert (first["prev_hash"], first["hash"]) == (GENESIS_HASH, events[0].hash)
        assert first["created_at"] == events[0].created_at.isoformat(timespec="microseconds")

    def test_auditor_may_export(self, client, auditor, admin, cluster):
        append_events(1, user=admin, target=cluster)
        client.force_login(auditor)
        assert len(read_csv(client.get(self.url))) == 2

    def test_team_lead_is_refused(self, client, lead_a):
        client.force_login(lead_a)
        assert client.get(self.url).status_code == 403

    def test_anonymous_is_sent_to_login(self, client):
        response = client.get(self.url)
        assert response.status_code == 302
        assert response.url.startswith(reverse("login"))

    def test_filters_by_action_and_day(self, client, admin, cluster):
        append_events(2, user=admin, target=cluster)
        audit_record(acting_user=admin, action="cluster.sync_mode", target=cluster)
        tamper(
            "UPDATE quotas_auditevent SET created_at = %s WHERE seq = 1",
            [datetime.datetime(2020, 5, 1, 12, tzinfo=datetime.UTC)],
        )
        client.force_login(admin)

        by_action = read_csv(client.get(self.url, {"action": "cluster.sync_mode"}))
        since = read_csv(client.get(self.url, {"since": "2021-01-01"}))
        both = read_csv(client.get(self.url, {"action": "allocation.set", "since": "2021-01-01"}))

        assert [r[0] for r in by_action[1:]] == ["3"]
        assert [r[0] for r in since[1:]] == ["2", "3"]
        assert [r[0] for r in both[1:]] == ["2"]

    def test_a_bad_since_is_a_clear_400(self, client, admin):
        client.force_login(admin)
        response = client.get(self.url, {"since": "last week"})
        assert response.status_code == 400
        assert b"since: give a time as ISO 8601" in response.content

    def test_the_export_says_its_charset_and_keeps_non_ascii_text(self, client, admin, cluster):
        audit_record(acting_user=admin, action="x", target=cluster, comment="扩容 ½ café")
        client.force_login(admin)
        response = client.get(self.url)
        # Without the charset a spreadsheet guesses the encoding and garbles the comment.
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        rows = read_csv(response)
        assert dict(zip(CSV_HEADER, rows[1], strict=True))["comment"] == "扩容 ½ café"

    def test_cells_that_would_run_as_formulas_are_neutralised(self, client, admin, cluster):
        audit_record(acting_user=admin, action="x", target=cluster, comment="=HYPERLINK(1)")
        client.force_login(admin)
        rows = read_csv(client.get(self.url))
        assert dict(zip(CSV_HEADER, rows[1], strict=True))["comment"] == "'=HYPERLINK(1)"


# --- the MAC and the anchors: a log wiped or rewritten by someone with database access --------

KEY = "audit-mac-key-for-tests-0123456789abcdef"


def rewrite_from(seq: int, *, comment: str, mac_secret: bytes | None = None) -> None:
    """Edit event ``seq`` and recompute every later hash and the head, as an attacker without
    the MAC key can (``mac_secret``: with a key of the attacker's, or a stolen one)."""
    events = list(AuditEvent.objects.filter(seq__gte=seq).order_by("seq"))
    prev_hash = events[0].prev_hash
    with append_only_suspended() as cursor:
        for event in events:
            if event.seq == seq:
                event.comment = comment
            event.prev_hash = prev_hash
            event.hash = audit_event_hash(**{f: getattr(event, f) for f in HASHED_FIELDS})
            if mac_secret is not None:
                event.mac = audit_event_mac(mac_secret, event.hash)
            cursor.execute(
                "UPDATE quotas_auditevent SET comment = %s, prev_hash = %s, hash = %s, mac = %s"
                " WHERE seq = %s",
                [event.comment, event.prev_hash, event.hash, event.mac, event.seq],
            )
            prev_hash = event.hash
    AuditChainHead.objects.filter(pk=1).update(last_hash=prev_hash)


def wipe() -> None:
    """Every event and the head gone (rows deleted with the triggers lifted)."""
    with append_only_suspended() as cursor:
        cursor.execute("DELETE FROM quotas_auditevent")
    AuditChainHead.objects.all().delete()


def verify_command(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("verify_audit_chain", *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue().strip()


@pytest.fixture
def anchor_file(settings, tmp_path):
    settings.AUDIT_MAC_KEY = KEY
    settings.AUDIT_ANCHOR_FILE = str(tmp_path / "audit-anchors.jsonl")
    return tmp_path / "audit-anchors.jsonl"


@pytest.mark.django_db
class TestWipedOrRewrittenLog:
    def test_a_rewrite_with_every_later_hash_recomputed_is_caught_by_the_mac(
        self, settings, admin, cluster
    ):
        settings.AUDIT_MAC_KEY = KEY
        append_events(20, user=admin, target=cluster)
        rewrite_from(17, comment="nothing to see")

        # The chain itself is consistent again: only the MAC shows the rewrite.
        assert audit_verify().reason == "event 17: MAC does not match (rewritten without the key?)"
        assert verify_command() == (
            1,
            "audit chain BROKEN at event 17: MAC does not match (rewritten without the key?)",
        )

    def test_a_rewrite_with_macs_of_another_key_is_caught(self, settings, admin, cluster):
        settings.AUDIT_MAC_KEY = KEY
        append_events(5, user=admin, target=cluster)
        rewrite_from(2, comment="forged", mac_secret=b"the attacker's own key")

        result = audit_verify()

        assert (result.ok, result.first_broken_seq) == (False, 2)

    def test_a_wiped_log_and_head_are_caught_by_the_anchors(self, anchor_file, admin, cluster):
        append_events(5, user=admin, target=cluster)
        audit_anchor_write(reason="test")
        wipe()

        code, message = verify_command()

        assert code == 1
        assert message.startswith("audit chain BROKEN at event 1: missing, but the anchor of ")
        assert f"({anchor_file}:1) recorded events up to 5; the log ends at event 0" in message

    @pytest.mark.skipif(connection.vendor != "postgresql", reason="TRUNCATE is PostgreSQL's")
    def test_truncate_on_postgresql_is_caught_by_the_anchors(self, anchor_file, admin, cluster):
        append_events(3, user=admin, target=cluster)
        audit_anchor_write(reason="test")
        with connection.cursor() as cursor:
            # No row trigger fires on TRUNCATE: the database lets it through.
            cursor.execute("TRUNCATE quotas_auditevent, quotas_auditchainhead")
        assert AuditEvent.objects.count() == 0

        result = audit_verify(anchors=audit_anchors_read([anchor_file]))

        assert (result.ok, result.checked, result.first_broken_seq) == (False, 0, 1)
        assert "recorded events up to 3; the log ends at event 0" in result.reason

    def test_events_cut_from_the_end_with_the_head_rewound_are_caught(
        self, anchor_file, admin, cluster
    ):
        append_events(8, user=admin, target=cluster)
        audit_anchor_write(reason="test")
        kept = AuditEvent.objects.get(seq=5)
        tamper("DELETE FROM quotas_auditevent WHERE seq > %s", [5])
        AuditChainHead.objects.filter(pk=1).update(last_seq=5, last_hash=kept.hash)

        result = audit_verify(anchors=audit_anchors_read([anchor_file]))

        assert result.first_broken_seq == 6
        assert "recorded events up to 8; the log ends at event 5" in result.reason

    def test_a_rewrite_with_a_stolen_key_is_caught_by_the_anchors(
        self, anchor_file, admin, cluster
    ):
        append_events(6, user=admin, target=cluster)
        audit_anchor_write(reason="test")
        rewrite_from(3, comment="forged", mac_secret=audit_mac_key().secret)
        assert audit_verify().ok  # with the key, the rewrite is perfect...

        result = audit_verify(anchors=audit_anchors_read([anchor_file]))

        assert result.first_broken_seq == 6  # ...but the anchored MAC of event 6 changed
        assert result.reason.startswith("event 6: MAC differs from the anchor of ")
        assert result.reason.endswith("(rewritten?)")

    def test_anchors_that_still_match_verify(self, anchor_file, admin, cluster):
        append_events(3, user=admin, target=cluster)
        audit_anchor_write(reason="test")
        append_events(2, user=admin, target=cluster)
        audit_anchor_write(reason="test")
        append_events(1, user=admin, target=cluster)  # after the last anchor: fine

        assert verify_command() == (0, "audit chain OK: 6 events, 2 anchors match")

    def test_anchors_are_read_back_from_a_log_stream(
        self, settings, admin, cluster, caplog, tmp_path
    ):
        settings.AUDIT_MAC_KEY = KEY
        settings.AUDIT_ANCHOR_FILE = ""
        caplog.set_level(logging.INFO, logger="quotas.audit.anchor")
        append_events(4, user=admin, target=cluster)
        audit_anchor_write(reason="beat")
        shipped = tmp_path / "portal.log"
        shipped.write_text(
            "2026-01-01 00:00:00 INFO quotas.tasks something else\n"
            + "".join(
                f"2026-01-01 00:00:01 INFO {r.name} {r.getMessage()}\n" for r in caplog.records
            )
        )
        assert verify_command("--anchors", str(shipped)) == (
            0,
            "audit chain OK: 4 events, 1 anchors match",
        )
        wipe()
        assert verify_command("--anchors", str(shipped))[0] == 1

    def test_an_edited_anchor_file_is_refused(self, anchor_file, admin, cluster):
        append_events(2, user=admin, target=cluster)
        audit_anchor_write(reason="test")
        with anchor_file.open("a") as fh:
            fh.write("{not json\n")

        assert verify_command() == (
            1,
            f"audit anchors BROKEN: {anchor_file}:2: not an audit anchor line",
        )

    def test_rotated_keys_verify_with_the_previous_key_listed(self, settings, admin, cluster):
        settings.AUDIT_MAC_KEY = "old-" + KEY
        append_events(2, user=admin, target=cluster)
        settings.AUDIT_MAC_KEY = "new-" + KEY
        append_events(1, user=admin, target=cluster)

        result = audit_verify()
        assert result.first_broken_seq == 1
        assert "which is neither AUDIT_MAC_KEY nor one of AUDIT_MAC_PREVIOUS_KEYS" in result.reason
        settings.AUDIT_MAC_PREVIOUS_KEYS = ["old-" + KEY]
        assert audit_verify().ok

    def test_without_a_key_the_demo_key_is_derived_from_the_secret_key(self, settings):
        settings.AUDIT_MAC_KEY = ""
        settings.SECRET_KEY = "s1" * 30
        first = audit_mac_key()
        settings.SECRET_KEY = "s2" * 30
        assert audit_mac_key() != first
        settings.AUDIT_MAC_KEY = KEY
        assert audit_mac_key().secret == KEY.encode()

    def test_the_migration_macs_as_the_live_code_does(self, settings, admin, cluster):
        for key in (KEY, ""):
            settings.AUDIT_MAC_KEY = key
            live = audit_mac_key()
            assert mac_migration._mac_key() == (live.key_id, live.secret)
        (event,) = append_events(1, user=admin, target=cluster)
        assert mac_migration._event_mac(audit_mac_key().secret, event.hash) == event.mac

    def test_the_migration_macs_events_written_before_the_mac(self, settings, admin, cluster):
        settings.AUDIT_MAC_KEY = KEY
        append_events(4, user=admin, target=cluster)
        tamper("UPDATE quotas_auditevent SET mac = '', mac_key_id = ''", [])
        assert not audit_verify().ok

        run_mac_migration()

        assert audit_verify().ok
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
            AuditEvent.objects.filter(seq=2).update(comment="triggers are back")


@pytest.mark.django_db
class TestAnchorWriting:
    def test_beat_appends_one_json_line_per_anchor(self, anchor_file, admin, cluster):
        anchor_audit_log()  # an empty log: nothing to anchor
        assert not anchor_file.exists()
        events = append_events(3, user=admin, target=cluster)

        anchor_audit_log()
        anchor_audit_log()

        lines = [json.loads(line) for line in anchor_file.read_text().splitlines()]
        assert len(lines) == 2
        assert lines[0]["seq"] == 3 and lines[0]["hash"] == events[-1].hash
        assert lines[0]["mac"] == events[-1].mac and lines[0]["reason"] == "beat"
        assert lines[0]["key_id"] == audit_mac_key().key_id

    def test_an_unwritable_anchor_file_is_logged_not_raised(
        self, settings, admin, cluster, caplog, tmp_path
    ):
        settings.AUDIT_ANCHOR_FILE = str(tmp_path / "missing-dir" / "anchors")
        append_events(1, user=admin, target=cluster)
        assert audit_anchor_write(reason="beat").seq == 1
        assert "cannot append to" in caplog.text

    def test_beat_has_an_anchor_entry(self, settings):
        from django_celery_beat.models import PeriodicTask

        from portal.schedules import ensure_default_schedules

        ensure_default_schedules()
        entry = PeriodicTask.objects.get(task="quotas.anchor_audit_log")
        assert entry.interval.every == settings.AUDIT_ANCHOR_SECONDS == 300


class TestSystemChecks:
    def run(self, deploy: bool) -> dict[str, str]:
        from django.core.checks import run_checks

        return {
            m.id: m.msg
            for m in run_checks(include_deployment_checks=deploy)
            if m.id.startswith("quotas.")
        }

    def test_a_missing_key_is_an_error_for_deployment(self, settings):
        settings.AUDIT_MAC_KEY = ""
        settings.DEBUG = False
        assert "quotas.E001" in self.run(deploy=True)
        assert set(self.run(deploy=False)) == {"quotas.W001"}
        settings.DEBUG = True
        assert "quotas.E001" not in self.run(deploy=True)

    def test_a_short_key_is_an_error_and_a_good_one_is_clean(self, settings, tmp_path):
        settings.DEBUG = False
        settings.AUDIT_ANCHOR_FILE = str(tmp_path / "anchors.jsonl")
        settings.AUDIT_ANCHOR_FILE_IS_DEMO = False
        settings.AUDIT_MAC_KEY = "short"
        assert "quotas.E002" in self.run(deploy=True)
        settings.AUDIT_MAC_KEY = KEY
        assert self.run(deploy=True) == {}

    def test_no_anchor_file_of_ones_own_is_an_error_for_deployment(self, settings, tmp_path):
        settings.DEBUG = False
        settings.AUDIT_MAC_KEY = KEY
        # Unset in the environment: the demo's file in PORTAL_VAR_DIR.
        settings.AUDIT_ANCHOR_FILE = str(tmp_path / "audit-anchors.jsonl")
        settings.AUDIT_ANCHOR_FILE_IS_DEMO = True
        found = self.run(deploy=True)
        assert set(found) == {"quotas.E003"}
        assert "AUDIT_ANCHOR_FILE is not set" in found["quotas.E003"]
        assert "quotas.E003" not in self.run(deploy=False)
        settings.AUDIT_ANCHOR_FILE, settings.AUDIT_ANCHOR_FILE_IS_DEMO = "", False
        assert set(self.run(deploy=True)) == {"quotas.E003"}
        settings.AUDIT_ANCHOR_FILE = "/srv/anchors/audit.jsonl"
        assert self.run(deploy=True) == {}
        settings.DEBUG, settings.AUDIT_ANCHOR_FILE = True, ""
        assert "quotas.E003" not in self.run(deploy=True)


def test_the_demo_anchors_in_its_var_dir_by_default(tmp_path):
    """Nothing set: the anchor file is PORTAL_VAR_DIR/audit-anchors.jsonl (the test settings
    turn it off, so this reads the portal's own settings in a fresh process)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "PORTAL_", "AUDIT_")) and k != "DATABASE_URL"
    }
    env.update(DJANGO_SETTINGS_MODULE="portal.settings", PORTAL_VAR_DIR=str(tmp_path))
    code = (
        "import django;django.setup();from django.conf import settings as s;"
        "print(s.AUDIT_ANCHOR_FILE, s.AUDIT_ANCHOR_FILE_IS_DEMO)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert out.stdout.strip() == f"{tmp_path / 'audit-anchors.jsonl'} True", out.stderr
    env["AUDIT_ANCHOR_FILE"] = "/srv/anchors/audit.jsonl"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert out.stdout.strip() == "/srv/anchors/audit.jsonl False", out.stderr


@pytest.mark.django_db
def test_an_anchor_file_it_creates_is_the_owners_alone(settings, tmp_path, admin, cluster):
    settings.AUDIT_ANCHOR_FILE = str(tmp_path / "audit-anchors.jsonl")
    append_events(2, user=admin, target=cluster)
    anchor_audit_log()
    mode = stat.S_IMODE((tmp_path / "audit-anchors.jsonl").stat().st_mode)
    assert mode == 0o600, oct(mode)


# --- completeness: the log against the rows it audits -------------------------------------------


def request_for(lead, ns, gpu, guarantee: int, cap: int):
    from approvals.lifecycle import request_create
    from approvals.lines import LineInput

    return request_create(
        team=ns.team,
        acting_user=lead,
        justification="more training runs",
        lines=[LineInput(ns.pk, gpu.pk, guarantee, cap)],
        submit=True,
    )


def cut_last(n: int) -> None:
    """The last ``n`` events gone and the head moved back to the new tip, as someone who can
    write the database leaves the log: a consistent chain, shorter."""
    tip = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() - n
    tamper("DELETE FROM quotas_auditevent WHERE seq > %s", [tip])
    kept = AuditEvent.objects.get(seq=tip)
    AuditChainHead.objects.filter(pk=1).update(last_seq=tip, last_hash=kept.hash)


@pytest.mark.django_db
class TestCompleteness:
    def test_an_intact_log_passes(self, admin, lead_a, alloc_a, ns_a, gpu, strict_policy):
        allocation_set(team_namespace=ns_a, resource=gpu, guarantee=5, cap=10, acting_user=admin)
        request_for(lead_a, ns_a, gpu, 7, 8)
        events = AuditEvent.objects.count()

        assert verify_command() == (0, f"audit chain OK: {events} events, 0 anchors match")

    def test_a_wiped_log_without_anchors_fails_naming_what_it_lacks(
        self, admin, lead_a, alloc_a, ns_a, gpu, strict_policy
    ):
        request = request_for(lead_a, ns_a, gpu, 7, 8)
        wipe()  # every event and the head: the chain alone reads as an empty, sound log

        code, message = verify_command()

        assert code == 1
        assert message.startswith("audit log INCOMPLETE: "), message
        assert (
            "allocation versions without their allocation.changed event: 1 "
            "(demo/team-a-training nvidia.com/gpu version 1)"
        ) in message
        assert "requests without their request.draft event (of their creation): 1 " in message
        assert f"(request #{request.pk})" in message
        assert f"request #{request.pk} ({request.status})" in message

    def test_a_log_cut_short_with_its_head_fails(self, admin, alloc_a, ns_a, gpu):
        allocation_set(team_namespace=ns_a, resource=gpu, guarantee=5, cap=10, acting_user=admin)
        allocation_set(team_namespace=ns_a, resource=gpu, guarantee=4, cap=10, acting_user=admin)
        cut_last(2)
        assert audit_verify(complete=False).ok  # the chain itself is consistent again

        code, message = verify_command()

        assert code == 1
        assert message == (
            "audit log INCOMPLETE: allocation versions without their allocation.changed "
            "event: 2 (demo/team-a-training nvidia.com/gpu version 2, "
            "demo/team-a-training nvidia.com/gpu version 3) (events deleted, or the log "
            "emptied or cut short?)"
        )

    def test_a_request_whose_last_move_was_cut_fails(
        self, admin, lead_a, alloc_a, ns_a, gpu, strict_policy
    ):
        from approvals.lifecycle import request_reject

        request = request_for(lead_a, ns_a, gpu, 7, 8)
        request_reject(request=request, acting_user=admin, comment="no")
        cut_last(1)

        result = audit_verify()

        assert not result.ok and result.first_broken_seq is None
        assert result.missing == (
            "request states without their request.<status> event (of the move into their "
            f"status): 1 (request #{request.pk} (rejected))",
        )

    def test_the_check_costs_one_query_per_kind_of_row_whatever_their_number(
        self, admin, ns_a, gpu, django_assert_num_queries
    ):
        from quotas.audit.chain import AUDIT_COVERAGE, audit_missing_events

        for cap in range(2, 40):
            allocation_set(
                team_namespace=ns_a, resource=gpu, guarantee=1, cap=cap, acting_user=admin
            )
        with django_assert_num_queries(len(AUDIT_COVERAGE)):
            assert audit_missing_events() == []
