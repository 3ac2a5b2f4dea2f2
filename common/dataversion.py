"""The data version: a value that changes whenever a write is committed to the database.

Pages that take long to compute keep what they showed under the version they read
(common.pagecache); a page asked for again at the same version can be shown as it was. That is
only safe if no committed write can go unseen, whatever does it (a service, the Django admin, a
shell, QuerySet.update, raw SQL, a migration), so the version is PostgreSQL's own record of
transactions, not something the code that writes has to remember to move:
``pg_current_snapshot()``, the highest transaction id handed out so far and the ones still in
progress.

Why equal versions mean no write was committed in between: a transaction gets an id at its
first write. If it got it before the first reading, it was in progress then and is not any
more at the second (it left the in-progress list); if after, the highest id handed out grew.
Either way the two readings differ. The version never comes back to an earlier value (ids only
grow, and a finished transaction never returns to the list), so a part kept under an old
version is never shown after a commit.

The version is read before the page's data, so a part is never older than its version (it
may be newer, harmlessly: that version is over by then). It is coarser than the portal's data:
a write to any table of any database of the same server moves it too, which only costs a
recomputation. Nothing needs installing and nothing is locked.

None (compute every time) inside a transaction (a TestCase, a view that writes: uncommitted
writes of its own are not in the snapshot's terms), and on SQLite, the zero-install demo, which
has no such record.
"""

from django.db import DEFAULT_DB_ALIAS, connections


def data_version(using: str = DEFAULT_DB_ALIAS) -> str | None:
    """The current version, or None when there is none to rely on."""
    connection = connections[using]
    if connection.in_atomic_block or connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_snapshot()::text")
        return cursor.fetchone()[0]
