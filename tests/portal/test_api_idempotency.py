"""Safe retries: Idempotency-Key on API writes. The same key and body replay the first answer
and do nothing twice; another body is a 422; two clients racing with one key make one effect."""

import contextlib
import threading
from contextlib import contextmanager
from datetime import timedelta

import psycopg
import pytest
from django.db import OperationalError, connection, connections
from django.utils import timezone
from psycopg import sql

from approvals.models import QuotaRequest
from common.api import idempotency
from common.api.idempotency import IdempotencyKey
from quotas.models import AuditEvent, ClusterCapacity
from tests.support.api import as_user, body
from tests.support.locks import lock_waiters
from tests.support.waiting import poll

pytestmark = pytest.mark.django_db


def create(client, key: str, data: dict | None = None):
    return client.post("/api/v1/requests/", data or body(), format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_same_key_same_body_replays_the_first_answer(plan, lead_c, strict_policy):
    client = as_user(lead_c)
    first = create(client, "k-1")
    assert first.status_code == 201
    count = QuotaRequest.objects.count()
    again = create(client, "k-1")
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert QuotaRequest.objects.count() == count
    # Key order and spacing do not make another body.
    reordered = client.post(
        "/api/v1/requests/",
        data='{"submit": true, ' + __import__("json").dumps(body())[1:],
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )
    assert reordered.status_code == 201 and reordered.json()["id"] == first.json()["id"]


def test_same_key_other_body_is_a_422(plan, lead_c, strict_policy):
    client = as_user(lead_c)
    assert create(client, "k-2").status_code == 201
    other = create(client, "k-2", body("2", "5"))
    assert other.status_code == 422
    error = other.json()
    assert set(error) == {"message", "extra"}
    assert error["extra"]["code"] == "idempotency_key_reused"
    assert error["extra"]["field"] == "Idempotency-Key"
    # Another endpoint with the same key is another request too.
    elsewhere = client.post(
        "/api/v1/requests/preview/", body(), format="json", HTTP_IDEMPOTENCY_KEY="k-2"
    )
    assert elsewhere.status_code == 422


def test_keys_are_per_user(plan, lead_c, admin, strict_policy):
    data = body()
    mine = create(as_user(lead_c), "shared", data)
    theirs = create(as_user(admin), "shared", data)
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]


def test_an_expired_key_is_as_good_as_new(plan, lead_c, strict_policy):
    client = as_user(lead_c)
    first = create(client, "k-3").json()
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    second = create(client, "k-3").json()
    assert second["id"] != first["id"]


def test_the_key_lives_as_configured(plan, lead_c, strict_policy, settings):
    settings.IDEMPOTENCY_KEY_HOURS = 5
    create(as_user(lead_c), "k-4")
    row = IdempotencyKey.objects.get(key="k-4")
    assert timedelta(hours=4, minutes=59) < row.expires_at - row.created_at <= timedelta(hours=5)


def test_a_refusal_is_not_kept_and_a_retry_runs_again(plan, lead_c, strict_policy):
    client = as_user(lead_c)
    refused = create(client, "k-5", body("3", "10"))  # cap above the 50% rule
    assert refused.status_code == 400
    assert not IdempotencyKey.objects.filter(key="k-5").exists()
    assert create(client, "k-5", body("3", "10")).status_code == 400


def test_a_lifecycle_move_is_done_once(plan, lead_c, admin, strict_policy):
    created = as_user(lead_c).post("/api/v1/requests/", body(), format="json").json()
    client = as_user(admin)
    url = f"/api/v1/requests/{created['id']}/reject/"
    first = client.post(url, {"comment": "no"}, format="json", HTTP_IDEMPOTENCY_KEY="r-1")
    second = client.post(url, {"comment": "no"}, format="json", HTTP_IDEMPOTENCY_KEY="r-1")
    assert first.status_code == second.status_code == 200
    assert second.json() == first.json() and second["ETag"] == first["ETag"]
    rejected = AuditEvent.objects.filter(action="request.rejected", target_id=str(created["id"]))
    assert rejected.count() == 1
    # Without the key, the same move again is refused: it was really done once.
    assert client.post(url, {"comment": "no"}, format="json").status_code == 409


def test_delete_with_a_key_answers_the_same_twice(plan, lead_c, strict_policy):
    client = as_user(lead_c)
    draft = client.post("/api/v1/requests/", body(submit=False), format="json").json()
    url = f"/api/v1/requests/{draft['id']}/"
    assert client.delete(url, HTTP_IDEMPOTENCY_KEY="d-1").status_code == 204
    assert client.delete(url, HTTP_IDEMPOTENCY_KEY="d-1").status_code == 204
    assert client.delete(url).status_code == 404


def test_a_bad_key_is_a_400_naming_the_header(plan, lead_c):
    response = create(as_user(lead_c), "x" * 256)
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "Idempotency-Key"


def test_every_api_write_takes_the_key():
    from tests.support.api import API, view_methods

    writes = [
        (name, callback.cls)
        for _, name, callback, _ in API
        # The catch-all (any other path, a JSON 404) is no endpoint and writes nothing.
        if name != "api-not-found" and view_methods(callback) & {"POST", "PUT", "PATCH", "DELETE"}
    ]
    assert writes
    for name, cls in writes:
        assert issubclass(cls, idempotency.IdempotentMixin), f"{name}: add IdempotentMixin"


# --- two clients racing with one key (PostgreSQL: real row locks and a real constraint) ------


@contextmanager
def capacity_held(cluster, gpu):
    """The cluster's GPU capacity row locked by another session (as a concurrent approval holds
    it): a create-and-submit waits for it inside its request's transaction, holding its key,
    until ``release()``."""
    table = ClusterCapacity._meta.db_table
    with psycopg.connect(**connection.get_connection_params()) as other:
        query = "SELECT 1 FROM {} WHERE cluster_id = %s AND resource_id = %s FOR UPDATE"
        other.execute(sql.SQL(query).format(sql.Identifier(table)), [cluster.pk, gpu.pk])
        yield other.commit
        other.commit()


def _race(clients, key: str) -> tuple[list, list[threading.Thread]]:
    barrier = threading.Barrier(len(clients))
    answers = [None] * len(clients)

    def run(index, client):
        try:
            barrier.wait()
            answers[index] = create(client, key)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(clients)
    ]
    for t in threads:
        t.start()
    return answers, threads


def _joined(answers, threads) -> list:
    for t in threads:
        t.join(60)
    assert None not in answers, answers
    return answers


def _drafts() -> int:
    return AuditEvent.objects.filter(action="request.draft").count()


postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="races need PostgreSQL (SQLite locks the file)"
)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_clients_racing_with_one_key_make_one_request(
    plan, lead_c, cluster, gpu, strict_policy
):
    """The second arrives while the first works: the first holds its key while it waits for the
    capacity row; the second waits for the key. Both wait (seen in pg_stat_activity) before
    the capacity is released."""
    token_clients = [as_user(lead_c), as_user(lead_c)]  # two tokens, one user
    with capacity_held(cluster, gpu):
        answers, threads = _race(token_clients, "race-1")
        poll("both requests waiting for a lock", lambda: lock_waiters() == 2, 60, 0.02)
    answers = _joined(answers, threads)
    assert [a.status_code for a in answers] == [201, 201]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert _drafts() == 1
    assert QuotaRequest.objects.count() == 1
    assert sorted(a.get("Idempotent-Replayed", "") for a in answers) == ["", "true"]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_key_still_in_progress_is_a_409_with_retry_after(
    plan, lead_c, cluster, gpu, strict_policy, monkeypatch
):
    """The first request holds its key (waiting for the capacity row) until the second has
    waited out WAIT_SECONDS for it and answered."""
    monkeypatch.setattr(idempotency, "WAIT_SECONDS", 0.2)
    with capacity_held(cluster, gpu):
        answers, threads = _race([as_user(lead_c), as_user(lead_c)], "race-2")
        poll("the second request's answer", lambda: any(answers), 60, 0.02)
    answers = _joined(answers, threads)
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201, 409]
    busy = next(a for a in answers if a.status_code == 409)
    assert busy.json()["extra"]["code"] == "idempotency_in_progress"
    assert busy["Retry-After"] == "1"
    assert _drafts() == 1
    assert QuotaRequest.objects.count() == 1
    # Once the first is done, the retry replays its answer.
    again = create(as_user(lead_c), "race-2")
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"


# --- crashes: the work and its stored answer are committed together or not at all ------------


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_crash_after_the_work_rolls_it_back_and_the_retry_does_it_once(plan, lead_c):
    """The database connection is cut after the request was created but before its answer
    was stored: nothing stays, not even the claim (it would block the key for a day), so the
    client's retry creates the request, once. The server terminates the session for real,
    just before the statement that stores the answer (seen through Django's execute_wrapper)."""
    storing = f'UPDATE "{IdempotencyKey._meta.db_table}"'
    cut = []

    def cut_off_before_the_answer(execute, sql, params, many, context):
        if sql.startswith(storing) and not cut:
            cut.append(sql)
            with contextlib.suppress(OperationalError), connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return execute(sql, params, many, context)

    client = as_user(lead_c)
    client.raise_request_exception = False
    with connection.execute_wrapper(cut_off_before_the_answer):
        assert create(client, "crash-1").status_code == 500
    assert cut, "no answer was stored"
    connection.close()  # as Django closes an unusable connection when a request ends
    assert QuotaRequest.objects.count() == 0
    assert not IdempotencyKey.objects.filter(key="crash-1").exists()
    retried = create(client, "crash-1")
    assert retried.status_code == 201
    assert list(QuotaRequest.objects.values_list("pk", flat=True)) == [retried.json()["id"]]
    assert create(client, "crash-1")["Idempotent-Replayed"] == "true"


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_an_answer_lost_after_the_commit_is_replayed_not_redone(plan, lead_c):
    """Work after the commit fails (here a step queued for after the commit of the new
    request, as the notifications and syncs are, raises): the client sees an error, but the
    request is made and its answer kept with it, so the retry gets that answer and nothing is
    made twice. The failing step comes in through Django's own hooks (a post_save receiver
    that queues it with on_commit); the portal's code runs unchanged."""
    from django.db import transaction
    from django.db.models.signals import post_save

    def broker_down():
        raise ConnectionError("Error 111 connecting to the broker")

    def after_the_request_is_made(sender, instance, created, **kwargs):
        if created:
            transaction.on_commit(broker_down)

    post_save.connect(after_the_request_is_made, sender=QuotaRequest, dispatch_uid="lost-answer")
    try:
        client = as_user(lead_c)
        client.raise_request_exception = False
        assert create(client, "lost-1").status_code == 500
    finally:
        post_save.disconnect(sender=QuotaRequest, dispatch_uid="lost-answer")
    made = QuotaRequest.objects.get()
    assert made.status == QuotaRequest.Status.SUBMITTED
    retried = create(client, "lost-1")
    assert retried.status_code == 201 and retried["Idempotent-Replayed"] == "true"
    assert retried.json()["id"] == made.pk
    assert QuotaRequest.objects.count() == 1
