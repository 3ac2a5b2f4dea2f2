"""The data version: one number that changes with every committed write to the portal's data.

Pages that take long to compute keep what they showed under the version they read
(common.pagecache); a page asked for again at the same version can be shown as it was. That is
only safe if no write can go unseen, so the version is kept by the database itself rather than
by the code that writes: a trigger on every table of the portal's data moves it, whatever does
the write (a service, the Django admin, a management command, QuerySet.update, bulk_create,
raw SQL, a migration).

- PostgreSQL: a statement trigger on each tracked table (insert, update, delete, truncate)
  notes, once per transaction, that the transaction wrote: one row in portal_data_change. That
  row's constraint trigger, deferred to commit, moves the version and deletes the row: once
  per transaction, inside it, as its last act. A reader sees the new version exactly when it
  sees the data. The version's row is locked only at that moment, after every other lock the
  transaction takes, so it adds no lock-order hazard; writers wait for each other only for the
  instant of their commits. Statement triggers cost the same for one row or a million (the
  usage import), and a statement that matched no row moves the version for nothing, harmlessly.
- SQLite: a trigger on every row written; SQLite has one writer at a time anyway.

The version is the later of "one more" and the time in microseconds, so it never comes back to a
value it had: not after a flush recreated its row, nor after a restore from an older backup
(then "one more" would repeat values that already had other data behind them).

A reader inside a transaction (a TestCase; a view doing writes) gets None: its own uncommitted
writes are invisible to the version on PostgreSQL, so nothing may be kept or reused there.

Tables not covered (EXCLUDED) are never read by a kept page. Every other table of the portal's
apps and of the users and groups gets the trigger after each migrate (post_migrate), so a new
model is covered without anyone remembering to; a test checks it is.
"""

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, connections

TABLE = "portal_dataversion"
CHANGE_TABLE = "portal_data_change"  # PostgreSQL: a transaction's "I wrote", until its commit
TRIGGER = "portal_data_changed"
FUNCTION = "portal_data_changed"

# Apps whose tables are the portal's data; auth for users, groups and their links.
TRACKED_APPS = ("portal", "quotas", "approvals", "auth")
EXCLUDED = {
    TABLE: "the version itself",
    "portal_apitoken": "written on API use (last_used_at); no kept page shows tokens",
    "portal_idempotencykey": "stored API answers for replays; no kept page shows them",
}

# The version: microseconds since the epoch, or one more than before if that is later.
_PG_NOW_US = "(extract(epoch from clock_timestamp()) * 1000000)::bigint"
_SQLITE_NOW_US = "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"


def tracked_tables() -> list[str]:
    """Every table the version covers: the tracked apps' models (with their many-to-many
    tables), less EXCLUDED."""
    tables = set()
    for label in TRACKED_APPS:
        for model in apps.get_app_config(label).get_models(include_auto_created=True):
            if model._meta.managed and not model._meta.proxy:
                tables.add(model._meta.db_table)
    return sorted(tables - set(EXCLUDED))


def _pg_function_sql() -> list[str]:
    bump = (
        f"INSERT INTO {TABLE} (id, value) VALUES (1, {_PG_NOW_US}) "  # noqa: S608 - constants
        f"ON CONFLICT (id) DO UPDATE SET value = "
        f"greatest({TABLE}.value + 1, EXCLUDED.value)"
    )
    return [
        f"CREATE UNLOGGED TABLE IF NOT EXISTS {CHANGE_TABLE} (id bigserial PRIMARY KEY)",
        f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the first write of a transaction notes it; the rest find it noted
    IF coalesce(current_setting('portal.data_changed', true), '') <> 'on' THEN
        PERFORM set_config('portal.data_changed', 'on', true);
        INSERT INTO {CHANGE_TABLE} DEFAULT VALUES;
    END IF;
    RETURN NULL;
END $$""",
        f"""CREATE OR REPLACE FUNCTION {FUNCTION}_commit() RETURNS trigger LANGUAGE plpgsql
AS $$
BEGIN
    {bump};
    DELETE FROM {CHANGE_TABLE} WHERE id = NEW.id;
    RETURN NULL;
END $$""",  # noqa: S608 - constants
        f"DROP TRIGGER IF EXISTS {TRIGGER}_commit ON {CHANGE_TABLE}",
        f"CREATE CONSTRAINT TRIGGER {TRIGGER}_commit AFTER INSERT ON {CHANGE_TABLE} "
        f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {FUNCTION}_commit()",
    ]


def _pg_trigger_sql(table: str, *, create: bool) -> list[str]:
    statements = [f'DROP TRIGGER IF EXISTS {TRIGGER} ON "{table}"']
    if create:
        statements.append(
            f'CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "{table}" '
            f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()"
        )
    return statements


_SQLITE_EVENTS = ("insert", "update", "delete")


def _sqlite_trigger_sql(table: str, *, create: bool) -> list[str]:
    bump = (
        f"INSERT INTO {TABLE} (id, value) VALUES (1, {_SQLITE_NOW_US}) "  # noqa: S608 - constants
        f"ON CONFLICT (id) DO UPDATE SET value = max({TABLE}.value + 1, excluded.value)"
    )
    statements = []
    for event in _SQLITE_EVENTS:
        name = f"{TRIGGER}_{table}_{event}"
        statements.append(f'DROP TRIGGER IF EXISTS "{name}"')
        if create:
            statements.append(
                f'CREATE TRIGGER "{name}" AFTER {event.upper()} ON "{table}" BEGIN {bump}; END'
            )
    return statements


def covered_tables(using: str = DEFAULT_DB_ALIAS) -> set[str]:
    """The tables that have the trigger now, as the database says."""
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE t.tgname = %s AND c.relnamespace = to_regnamespace(current_schema()) "
                "AND t.tgtype & 1 = 0",  # a statement trigger (an older row trigger: replaced)
                [TRIGGER],
            )
            return {row[0] for row in cursor.fetchall()}
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT tbl_name, count(*) FROM sqlite_master WHERE type = 'trigger' "
                "AND name LIKE %s GROUP BY tbl_name",
                [f"{TRIGGER}_%"],
            )
            return {table for table, n in cursor.fetchall() if n == len(_SQLITE_EVENTS)}
    return set()


def install_triggers(using: str = DEFAULT_DB_ALIAS, **_kwargs) -> None:
    """Give every tracked table the trigger and take it from any other (after every migrate
    and flush; idempotent, and only the differences are written)."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        statements, trigger_sql = _pg_function_sql(), _pg_trigger_sql
    elif connection.vendor == "sqlite":
        statements, trigger_sql = [], _sqlite_trigger_sql
    else:
        return  # no version: pages are computed every time
    wanted, present = set(tracked_tables()), covered_tables(using)
    for table in sorted(wanted - present):
        statements += trigger_sql(table, create=True)
    for table in sorted(present - wanted):
        statements += trigger_sql(table, create=False)
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def data_version(using: str = DEFAULT_DB_ALIAS) -> int | None:
    """The current version, or None when it cannot be relied on: inside a transaction, on a
    database without the triggers, or before the first write created it."""
    connection = connections[using]
    if connection.in_atomic_block or connection.vendor not in ("postgresql", "sqlite"):
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT value FROM {TABLE} WHERE id = 1")  # noqa: S608 - a constant
        row = cursor.fetchone()
    return row[0] if row else None
