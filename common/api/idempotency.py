"""Safe retries: the ``Idempotency-Key`` header on every POST, PATCH, PUT and DELETE of the API.

A client that did not get an answer (a timeout, a dropped connection) sends the same request
again with the same key. The first request with a key (per user) claims it by inserting a row
under a unique (user, key) constraint, does the work and stores its answer, all in **one
database transaction**: the work and its stored answer are committed together or not at all.
A crash anywhere (the database connection cut, the process killed, an error while answering)
rolls the claim back with the work, so a retry does the work, once; a request that committed
has its answer kept, so a retry gets it (status, body, ``ETag`` and ``Location``, plus
``Idempotent-Replayed: true``) and does nothing. The same key with another method, path or body
is a 422.

Two requests racing with one key: the second one's insert waits for the first one's transaction
(a unique index does), at most ``WAIT_SECONDS``. When the first commits, the second replays its
answer; when it rolls back (a refusal, a crash), the second does the work; if the first is still
at work, the second gets a 409 (``extra.code == "idempotency_in_progress"``, ``Retry-After``)
and retries.

Only successful answers (2xx) are kept: a refusal rolls back with its claim, so a retry runs the
request again (a request refused as stale can be fixed and retried with the same key). Work
for after the commit (syncs, notifications) starts once the answer is committed too. Keys
expire ``IDEMPOTENCY_KEY_HOURS`` after first use; an expired key is as good as new.

A replay answers with the body stored for the first request, in that request's language: its
texts (a request's findings, labels) are not rendered again for the retry's Accept-Language.
A client retries with the headers it sent the first time, so both agree in practice.

The services' own transactions become savepoints of this one; the only row it holds while a
view reads a cluster (the usage snapshot of a submit) is its own key's, which only a retry of
the same request waits for.
"""

import hashlib
import json
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, OperationalError, connection, models, transaction
from django.http.request import RawPostDataException
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from rest_framework.request import Request
from rest_framework.response import Response

from common.errors import ApplicationError, NotAllowed, ValidationFailed

HEADER = "Idempotency-Key"
METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_KEY_LENGTH = 255
# How long a request waits for another one holding the same key before it gets a 409.
WAIT_SECONDS = 10.0
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE when lock_timeout expires
# Response headers replayed with the stored body.
KEPT_HEADERS = ("ETag", "Location")


class IdempotencyKeyReused(ApplicationError):
    """The key was first used for another request (method, path or body)."""

    status_code = 422


class IdempotencyInProgress(NotAllowed):
    """Another request with this key is still running."""


class IdempotencyKey(models.Model):
    """One ``Idempotency-Key`` of one user: the request it was first used for (a fingerprint of
    method, path and body) and, once that request succeeded, its response to replay.

    The unique (user, key) constraint is the lock: of two requests racing with the same key
    exactly one inserts the row and does the work; the other finds the row
    (idempotency_claim).

    The row belongs to the common app (common.models imports it so the app registers it); its
    table keeps the name it was made with when the portal app held it."""

    class State(models.TextChoices):
        IN_PROGRESS = "in_progress", _("in progress")
        DONE = "done", _("done")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="idempotency_keys",
        verbose_name=_("user"),
    )
    key = models.CharField(max_length=255, verbose_name=_("key"))
    fingerprint = models.CharField(max_length=64, verbose_name=_("fingerprint"))
    method = models.CharField(max_length=10, verbose_name=_("method"))
    path = models.CharField(max_length=500, verbose_name=_("path"))
    state = models.CharField(
        max_length=12, choices=State.choices, default=State.IN_PROGRESS, verbose_name=_("state")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    expires_at = models.DateTimeField(db_index=True, verbose_name=_("expires at"))
    response_status = models.PositiveSmallIntegerField(
        null=True, blank=True, verbose_name=_("response status")
    )
    response_body = models.JSONField(
        null=True, blank=True, encoder=DjangoJSONEncoder, verbose_name=_("response body")
    )
    response_headers = models.JSONField(
        default=dict, blank=True, verbose_name=_("response headers")
    )

    class Meta:
        verbose_name = _("idempotency key")
        verbose_name_plural = _("idempotency keys")
        db_table = "portal_idempotencykey"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotencykey_unique_user_key")
        ]

    def __str__(self) -> str:
        return f"{self.key} of {self.user_id} ({self.state})"


def request_fingerprint(*, method: str, path: str, body: bytes) -> str:
    """sha256 of method, path and body; a JSON body counts by its content, so key order and
    white space do not make it another body."""
    try:
        canonical = json.dumps(
            json.loads(body.decode("utf-8")) if body else None,
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
    except (ValueError, UnicodeError, RecursionError):
        canonical = body
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), canonical):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _check_key(key: str) -> str:
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable() or not key.isascii():
        raise ValidationFailed(
            gettext("%(header)s: give 1 to %(max)s printable ASCII characters (a UUID is best)")
            % {"header": HEADER, "max": MAX_KEY_LENGTH},
            field=HEADER,
            extra={"code": "invalid_idempotency_key"},
        )
    return key


def idempotency_claim(
    *, user, key: str, method: str, path: str, fingerprint: str
) -> tuple[IdempotencyKey, bool]:
    """The key's row and whether this request owns it (True: do the work, then
    ``idempotency_complete``; False: replay the row's answer).

    Runs inside the transaction that does the work and stores its answer (``IdempotentMixin``):
    the claim is seen by others only once it is committed with them. A request holding the
    key meanwhile is waited for, at most ``WAIT_SECONDS``."""
    for _attempt in range(3):
        now = timezone.now()
        try:
            with _lock_wait(WAIT_SECONDS), transaction.atomic():
                IdempotencyKey.objects.filter(user=user, key=key, expires_at__lte=now).delete()
                row = IdempotencyKey.objects.create(
                    user=user,
                    key=key,
                    fingerprint=fingerprint,
                    method=method,
                    path=path[:500],
                    expires_at=now + timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS),
                )
            return row, True
        except IntegrityError:
            row = IdempotencyKey.objects.filter(user=user, key=key).first()
        except OperationalError as exc:
            if not _lock_timed_out(exc):
                raise
            raise IdempotencyInProgress(
                gettext("%(header)s: a request with key %(key)s is still in progress; retry later")
                % {"header": HEADER, "key": repr(key)},
                field=HEADER,
                extra={"code": "idempotency_in_progress", "retry_after": 1},
            ) from None
        if row is None:
            continue  # expired and removed meanwhile: claim it again
        if row.fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                gettext(
                    "%(header)s: key %(key)s was used for another request (%(method)s %(path)s "
                    "with another body at %(at)s UTC); use a new key for a new request"
                )
                % {
                    "header": HEADER,
                    "key": repr(key),
                    "method": row.method,
                    "path": row.path,
                    "at": f"{row.created_at:%Y-%m-%d %H:%M:%S}",
                },
                field=HEADER,
                extra={"code": "idempotency_key_reused"},
            )
        if row.state == IdempotencyKey.State.DONE:
            return row, False
        # Committed but never completed: left by a crash of an older version, which claimed
        # keys outside the work's transaction. Nothing holds it: take it over.
        IdempotencyKey.objects.filter(pk=row.pk, state=IdempotencyKey.State.IN_PROGRESS).delete()
    raise IdempotencyInProgress(
        gettext("%(header)s: key %(key)s keeps changing hands; retry later")
        % {"header": HEADER, "key": repr(key)},
        field=HEADER,
        extra={"code": "idempotency_in_progress", "retry_after": 1},
    )


@contextmanager
def _lock_wait(seconds: float):
    """PostgreSQL: wait at most ``seconds`` for a row lock (here: the transaction that inserted
    the same key), then fail with lock_not_available. SQLite serializes writers whole."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
            [f"{max(1, int(seconds * 1000))}ms"],
        )
        previous = cursor.fetchone()[0]
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])


def _lock_timed_out(exc: OperationalError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) == LOCK_NOT_AVAILABLE


def idempotency_complete(*, row: IdempotencyKey, response: Response) -> None:
    headers = {name: response[name] for name in KEPT_HEADERS if response.has_header(name)}
    IdempotencyKey.objects.filter(pk=row.pk).update(
        state=IdempotencyKey.State.DONE,
        response_status=response.status_code,
        response_body=response.data,
        response_headers=headers,
    )


def replayed_response(row: IdempotencyKey) -> Response:
    """The stored answer as it was: its body is in the first request's language, whatever
    language the retry asks for (texts are not rendered again)."""
    response = Response(row.response_body, status=row.response_status)
    for name, value in row.response_headers.items():
        response[name] = value
    response["Idempotent-Replayed"] = "true"
    return response


class _Replay(Exception):
    def __init__(self, row: IdempotencyKey):
        self.row = row


class IdempotentMixin:
    """For every API view: honours ``Idempotency-Key`` on POST, PUT, PATCH and DELETE.

    Hooks in after authentication, permissions and throttles (``initial``), so a key belongs to
    the authenticated user; opens the transaction of the claim, the work and the stored answer
    there, and commits it in ``finalize_response`` (rolls it back on a refusal or a crash)."""

    _idempotency_row: IdempotencyKey | None = None
    _idempotency_atomic: transaction.Atomic | None = None

    def initial(self, request: Request, *args, **kwargs) -> None:
        self._idempotency_row = self._idempotency_atomic = None
        super().initial(request, *args, **kwargs)
        key = request.headers.get(HEADER)
        if key is None or request.method not in METHODS or not request.user.is_authenticated:
            return
        key = _check_key(key.strip())
        try:
            body = request._request.body  # read before the parser; kept for it in memory
        except RawPostDataException:  # a multipart body, read already: refused by the parser
            body = b""
        fingerprint = request_fingerprint(
            method=request.method, path=request.get_full_path(), body=body
        )
        self._idempotency_atomic = transaction.atomic()
        self._idempotency_atomic.__enter__()
        row, owned = idempotency_claim(
            user=request.user,
            key=key,
            method=request.method,
            path=request.get_full_path(),
            fingerprint=fingerprint,
        )
        if not owned:
            raise _Replay(row)
        self._idempotency_row = row

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, _Replay):
            return replayed_response(exc.row)
        try:
            response = super().handle_exception(exc)
        except BaseException as crash:
            # Not an answer but a crash: the work rolls back with the claim; a retry redoes it.
            self._idempotency_end(crash=crash)
            raise
        if isinstance(exc, IdempotencyInProgress):
            response["Retry-After"] = str(exc.extra["retry_after"])
        return response

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        row, self._idempotency_row = self._idempotency_row, None
        keep = (
            row is not None and isinstance(response, Response) and 200 <= response.status_code < 300
        )
        if keep:
            try:
                idempotency_complete(row=row, response=response)
            except BaseException as crash:
                self._idempotency_end(crash=crash)
                raise
        self._idempotency_end(commit=keep)
        return response

    def _idempotency_end(self, *, commit: bool = False, crash: BaseException | None = None):
        """Commit the claim, the work and the answer together, or roll all of them back."""
        atomic, self._idempotency_atomic = self._idempotency_atomic, None
        if atomic is None:
            return
        if crash is not None:
            atomic.__exit__(type(crash), crash, crash.__traceback__)
            return
        if not commit:
            transaction.set_rollback(True)
        atomic.__exit__(None, None, None)
