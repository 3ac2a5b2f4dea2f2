"""The samples partitioned by month on PostgreSQL (usage/partitions.py): the table becomes a
partitioned one keyed by (namespace, resource, timestamp, source), with a partition for each
month its samples fall in and a default one; its rows move over. The per-row foreign key
checks and the indexes nobody reads by (namespace alone, resource alone, id) go; the time
index becomes BRIN. On SQLite only the indexes and constraints change."""

# ruff: noqa: S608 - the statements name this migration's own tables and months.

import django.db.models.deletion
import usage.models.samples
from django.db import migrations, models

TABLE = "quotas_usagesample"
KEY = "usage_sample_unique_ns_resource_time_source"
MONTHS = f"""
    SELECT DISTINCT date_trunc('month', "timestamp" AT TIME ZONE 'UTC')::date FROM {TABLE}_old
"""


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from usage.partitions import DEFAULT, _range, partition_name

    run = schema_editor.execute
    run(f"ALTER TABLE {TABLE} RENAME TO {TABLE}_old")
    run(f"ALTER TABLE {TABLE}_old RENAME CONSTRAINT {KEY} TO {KEY}_old")
    run(f"ALTER TABLE {TABLE}_old RENAME CONSTRAINT {TABLE}_pkey TO {TABLE}_old_pkey")
    run(
        f"CREATE TABLE {TABLE} (LIKE {TABLE}_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
        'INCLUDING IDENTITY) PARTITION BY RANGE ("timestamp")'
    )
    run(
        f"ALTER TABLE {TABLE} ADD CONSTRAINT {KEY} PRIMARY KEY "
        '(team_namespace_id, resource_id, "timestamp", source)'
    )
    run(f"CREATE TABLE {DEFAULT} PARTITION OF {TABLE} DEFAULT")
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(MONTHS)
        months = sorted(month for (month,) in cursor.fetchall())
    for month in months:
        run(f"CREATE TABLE {partition_name(month)} PARTITION OF {TABLE} {_range(month)}")
    run(
        f"INSERT INTO {TABLE} OVERRIDING SYSTEM VALUE SELECT * FROM {TABLE}_old "
        'ORDER BY team_namespace_id, resource_id, "timestamp", source'
    )
    run(
        f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'id'), "
        f"(SELECT COALESCE(max(id), 0) + 1 FROM {TABLE}_old), false)"
    )
    run(f"DROP TABLE {TABLE}_old")


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    run = schema_editor.execute
    run(f"ALTER TABLE {TABLE} RENAME TO {TABLE}_old")
    run(f"ALTER TABLE {TABLE}_old RENAME CONSTRAINT {KEY} TO {KEY}_old")
    run(
        f"CREATE TABLE {TABLE} (LIKE {TABLE}_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
        "INCLUDING IDENTITY)"
    )
    run(f"ALTER TABLE {TABLE} ADD PRIMARY KEY (id)")
    run(
        f"ALTER TABLE {TABLE} ADD CONSTRAINT {KEY} UNIQUE "
        '(team_namespace_id, resource_id, "timestamp", source)'
    )
    run(f"INSERT INTO {TABLE} OVERRIDING SYSTEM VALUE SELECT * FROM {TABLE}_old")
    run(
        f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'id'), "
        f"(SELECT COALESCE(max(id), 0) + 1 FROM {TABLE}_old), false)"
    )
    run(f"DROP TABLE {TABLE}_old CASCADE")


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0017_cluster_suggest_prices"),
        ("usage", "0004_usagedaily_demand_counts"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="usagesample",
            name="usage_sample_timestamp",
        ),
        migrations.AlterField(
            model_name="usagesample",
            name="resource",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="usage_samples",
                to="quotas.resource",
                verbose_name="resource",
            ),
        ),
        migrations.AlterField(
            model_name="usagesample",
            name="team_namespace",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="usage_samples",
                to="quotas.teamnamespace",
                verbose_name="team namespace",
            ),
        ),
        migrations.RunPython(partition, unpartition, elidable=False),
        migrations.AddIndex(
            model_name="usagesample",
            index=usage.models.samples.TimeIndex(fields=["timestamp"], name="usage_sample_time"),
        ),
    ]
