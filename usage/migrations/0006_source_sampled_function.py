"""On PostgreSQL, ``usage_source_sampled(namespace, resource, source, after, before)``: has the
source a sample from ``after`` to before ``before``? The rollup's statement (usage/rollup.py)
asks it for a source whose last sample of the days rolled up has no neighbour among the
samples read, to count a neighbour further away. A function of its own (PL/pgSQL, which the
planner never inlines) so that the planner costs it as declared: it runs for a source's last
sample only, where a subquery in its place was costed for every sample and changed the plan."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION usage_source_sampled(
    namespace_id bigint, resource_id bigint, source varchar, after timestamptz,
    before timestamptz
) RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE COST 10 AS $$
BEGIN
    RETURN EXISTS (
        SELECT FROM quotas_usagesample s
        WHERE s.team_namespace_id = usage_source_sampled.namespace_id
          AND s.resource_id = usage_source_sampled.resource_id
          AND s."timestamp" >= usage_source_sampled.after
          AND s."timestamp" < usage_source_sampled.before
          AND s.source = usage_source_sampled.source);
END
$$
"""
DROP = "DROP FUNCTION IF EXISTS usage_source_sampled(bigint, bigint, varchar, timestamptz, timestamptz)"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("usage", "0005_sample_partitions")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
