# Hand-written: the audit events get a keyed MAC (HMAC-SHA256 of their hash with AUDIT_MAC_KEY).
#
# Events written before this migration are MACed here, with the key configured where migrate
# runs (AUDIT_MAC_KEY, else the demo key derived from DJANGO_SECRET_KEY): set AUDIT_MAC_KEY
# before migrating, and run verify_audit_chain first, since the MAC vouches for the log as it
# stands now. The append-only triggers are lifted for the backfill only, in this transaction.

import hashlib
import hmac

from django.conf import settings
from django.db import migrations, models

BACKFILL_BATCH = 1000
# Frozen copies of quotas.audit (migrations must not follow app code); tests check they agree.
DERIVED_KEY_LABEL = b"gpu-quota-portal audit MAC key (demo)"


def _mac_key():
    if settings.AUDIT_MAC_KEY:
        secret = settings.AUDIT_MAC_KEY.encode()
    else:
        secret = hmac.new(settings.SECRET_KEY.encode(), DERIVED_KEY_LABEL, hashlib.sha256).digest()
    return hmac.new(secret, b"key id", hashlib.sha256).hexdigest()[:16], secret


def _event_mac(secret, event_hash):
    return hmac.new(secret, b"audit-event:" + event_hash.encode(), hashlib.sha256).hexdigest()


SUSPEND = {
    "postgresql": (
        ["ALTER TABLE quotas_auditevent DISABLE TRIGGER quotas_auditevent_append_only"],
        ["ALTER TABLE quotas_auditevent ENABLE TRIGGER quotas_auditevent_append_only"],
    ),
    "sqlite": (
        [
            "DROP TRIGGER IF EXISTS quotas_auditevent_no_update",
            "DROP TRIGGER IF EXISTS quotas_auditevent_no_delete",
        ],
        [
            """
            CREATE TRIGGER quotas_auditevent_no_update BEFORE UPDATE ON quotas_auditevent
            BEGIN
                SELECT RAISE(ABORT, 'quotas_auditevent is append-only: UPDATE refused');
            END
            """,
            """
            CREATE TRIGGER quotas_auditevent_no_delete BEFORE DELETE ON quotas_auditevent
            WHEN OLD.id <> (SELECT min(id) FROM quotas_auditevent)
            BEGIN
                SELECT RAISE(ABORT, 'quotas_auditevent is append-only: DELETE refused');
            END
            """,
        ],
    ),
}


def mac_existing_events(apps, schema_editor):
    AuditEvent = apps.get_model("quotas", "AuditEvent")
    db = schema_editor.connection.alias
    suspend, resume = SUSPEND.get(schema_editor.connection.vendor, ([], []))
    key_id, secret = _mac_key()
    for statement in suspend:
        schema_editor.execute(statement, params=None)
    ids = list(AuditEvent.objects.using(db).filter(mac="").values_list("id", flat=True))
    for start in range(0, len(ids), BACKFILL_BATCH):
        events = list(
            AuditEvent.objects.using(db).filter(id__in=ids[start : start + BACKFILL_BATCH])
        )
        for event in events:
            event.mac, event.mac_key_id = _event_mac(secret, event.hash), key_id
        AuditEvent.objects.using(db).bulk_update(events, ["mac", "mac_key_id"])
    for statement in resume:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0007_syncrun_backend_problems"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="mac",
            field=models.CharField(default="", editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="auditevent",
            name="mac_key_id",
            field=models.CharField(default="", editable=False, max_length=16),
            preserve_default=False,
        ),
        migrations.RunPython(mac_existing_events, migrations.RunPython.noop),
    ]
