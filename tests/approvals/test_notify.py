"""Notifications: sent only after the commit, by e-mail and as signed webhooks to a real server.

Two ways of running the tasks, each where it is honest:
- ``eager``: ``.delay()`` runs the task inline (``task_always_eager``), so what on_commit queued is
  visible at once; eager ``.apply()`` also runs retries inline, ignoring the countdown. This proves
  the task's decisions (retry or not, what it sends), not the broker round trip.
- ``worker``: a real Celery worker thread on the configured broker (files, or Redis) runs the
  tasks; retries go back through the broker with their countdown.
"""

import hashlib
import hmac
import json
import logging
import re
import threading
from collections import Counter
from decimal import Decimal

import pytest
from celery.contrib.testing.worker import start_worker
from celery.exceptions import Ignore
from celery.signals import after_task_publish, task_postrun
from django.core import mail
from django.db import transaction

from approvals.notify import (
    EVENTS,
    WebhookSignatureError,
    check_signature,
    email_body,
    email_subject,
    notify,
    send_email_task,
    send_webhook_task,
    sign,
    verify_signature,
)
from approvals.notify import tasks as notify_module
from portal.celery import app
from tests.support.notify import SECRET, Receiver

PAYLOAD = {
    "id": 12,
    "team": "team-a",
    "status": "approved",
    "url": "https://quota.example.com/requests/12",
    "comment": "fine for the Q3 training run",
    "lines": [
        {
            "namespace": "team-a-training",
            "resource": "nvidia.com/gpu",
            "current_guarantee": Decimal("6"),
            "requested_guarantee": 10,
            "decided_guarantee": 8,
            "current_cap": 10,
            "requested_cap": 12,
            "decided_cap": 12,
        }
    ],
}


# --- a real webhook receiver ---------------------------------------------------------------


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


@pytest.fixture
def webhooks(settings, receiver):
    settings.WEBHOOK_URLS = [f"{receiver.url}/hooks/a", f"{receiver.url}/hooks/b"]
    settings.WEBHOOK_SECRET = SECRET
    settings.WEBHOOK_TIMEOUT = 5.0
    return receiver


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(notify_module, "BACKOFF_BASE", 0)  # retried at once


def envelope(event="request.decided", payload=None) -> str:
    return json.dumps(
        {
            "event": event,
            "id": "2b1f6c7e-0000-4000-8000-000000000001",
            "sent_at": "2025-01-01T00:00:00+00:00",
            "data": payload if payload is not None else {"id": 1},
        }
    )


# --- the API -------------------------------------------------------------------------------


def test_unknown_event_is_refused():
    with pytest.raises(ValueError, match=r"unknown notification event 'request\.approved'"):
        notify(event="request.approved", payload={}, recipients=["a@example.com"])


def test_a_decision_must_be_one_of_the_three():
    with pytest.raises(ValueError, match=r"request\.decided needs payload status"):
        notify(event="request.decided", payload={"status": "maybe"}, recipients=[])


def test_payload_that_is_not_json_is_refused_in_the_caller():
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        notify(event="request.submitted", payload={"x": object()}, recipients=[])


def test_events_are_the_request_events_and_the_cap_notice():
    assert {
        "request.submitted",
        "request.decided",
        "request.applied",
        "request.failed",
        "request.expiring",
        "request.expired",
        "request.withdrawn",
        "request.revoked",
        "request.commented",
        "team.near_cap",
    } == EVENTS


DELIVERY = "2b1f6c7e-0000-4000-8000-000000000001"


def test_signature_verifies_with_the_secret_only():
    body = b'{"event":"request.applied"}'
    header = sign(body, SECRET, delivery_id=DELIVERY)
    assert re.fullmatch(rf"t=\d+,id={DELIVERY},v1=[0-9a-f]{{64}}", header)
    assert verify_signature(body, SECRET, header, delivery_id=DELIVERY)
    assert not verify_signature(body, "wrong-secret", header, delivery_id=DELIVERY)
    assert not verify_signature(body + b" ", SECRET, header, delivery_id=DELIVERY)
    assert not verify_signature(body, SECRET, "", delivery_id=DELIVERY)
    assert not verify_signature(body, "", header, delivery_id=DELIVERY)
    assert not verify_signature(body, SECRET, "t=1,id=x,v1=é", delivery_id="x")
    assert not verify_signature(body, SECRET, "sha256=" + "0" * 64, delivery_id=DELIVERY)


def test_the_signature_covers_timestamp_and_delivery_id():
    body = b'{"event":"request.applied"}'
    header = sign(body, SECRET, delivery_id=DELIVERY, timestamp=1_700_000_000)
    fields = dict(part.split("=", 1) for part in header.split(","))
    expected = hmac.new(
        SECRET.encode(), f"1700000000.{DELIVERY}.".encode() + body, hashlib.sha256
    ).hexdigest()
    assert fields == {"t": "1700000000", "id": DELIVERY, "v1": expected}
    # Moving the timestamp or the id breaks the signature: neither can be changed on a replay.
    later = header.replace("t=1700000000", "t=1700000600")
    with pytest.raises(WebhookSignatureError, match="does not match"):
        check_signature(body, SECRET, later, delivery_id=DELIVERY, now=1_700_000_600)
    other = "3c2e7d8f-0000-4000-8000-000000000002"
    renamed = header.replace(DELIVERY, other)
    with pytest.raises(WebhookSignatureError, match="does not match"):
        check_signature(body, SECRET, renamed, delivery_id=other, now=1_700_000_000)


def test_a_replayed_delivery_is_refused_by_its_timestamp(settings):
    body = b'{"event":"request.applied"}'
    header = sign(body, SECRET, delivery_id=DELIVERY, timestamp=1_700_000_000)
    check_signature(body, SECRET, header, delivery_id=DELIVERY, now=1_700_000_000 + 299)
    with pytest.raises(WebhookSignatureError, match=r"301s old, more than the 300s tolerated"):
        check_signature(body, SECRET, header, delivery_id=DELIVERY, now=1_700_000_000 + 301)
    with pytest.raises(WebhookSignatureError, match=r"400s ahead"):
        check_signature(body, SECRET, header, delivery_id=DELIVERY, now=1_700_000_000 - 400)
    settings.WEBHOOK_SIGNATURE_TOLERANCE_SECONDS = 3600
    check_signature(body, SECRET, header, delivery_id=DELIVERY, now=1_700_000_000 + 3000)
    assert not verify_signature(
        body, SECRET, header, delivery_id=DELIVERY, tolerance_seconds=10, now=1_700_000_020
    )


def test_a_delivery_id_other_than_the_signed_one_is_refused():
    body = b'{"event":"request.applied"}'
    header = sign(body, SECRET, delivery_id=DELIVERY)
    with pytest.raises(WebhookSignatureError, match="not the X-Portal-Delivery header"):
        check_signature(body, SECRET, header, delivery_id="another-delivery")
    with pytest.raises(WebhookSignatureError, match="not the X-Portal-Delivery header"):
        check_signature(body, SECRET, header, delivery_id="")


def test_a_delivery_id_that_would_break_the_header_is_refused_when_signing():
    for bad in ("", "a,b", "a.b", "a=b"):
        with pytest.raises(ValueError, match="delivery id"):
            sign(b"{}", SECRET, delivery_id=bad)


# --- e-mail --------------------------------------------------------------------------------


def test_email_subject_names_request_decision_and_team():
    assert email_subject("request.decided", PAYLOAD) == "[GPU quota] request #12 approved (team-a)"
    changes = {**PAYLOAD, "status": "changes_requested"}
    assert email_subject("request.decided", changes) == (
        "[GPU quota] request #12 changes requested (team-a)"
    )
    assert email_subject("request.expiring", {"id": 3}) == "[GPU quota] request #3 expires soon"
    assert email_subject("request.submitted", {}) == "[GPU quota] request submitted"


def test_email_body_lists_lines_and_link():
    body = email_body("request.decided", PAYLOAD)
    assert body.startswith("Request #12 approved (team-a).\n")
    assert (
        "- team-a-training / nvidia.com/gpu: guarantee current 6, requested 10, decided 8; "
        "cap current 10, requested 12, decided 12"
    ) in body
    assert "Comment, as written:\n> fine for the Q3 training run\n" in body
    # The link comes right after what happened, before anything people wrote.
    assert body.split("\n")[1] == "Open the request: https://quota.example.com/requests/12"


def test_a_forged_link_and_signature_in_a_justification_read_as_quoted_text():
    forged = (
        "urgent\r\n\r\nOpen the request: https://evil.example/login\n-- \n"
        "GPU quota portal (request.submitted)\u202e\x1b[2J\x07"
    )
    body = email_body(
        "request.submitted",
        {"id": 7, "url": "https://quota.example.com/requests/7", "justification": forged},
    )
    lines = body.split("\n")
    assert lines[1] == "Open the request: https://quota.example.com/requests/7"
    quoted = lines[lines.index("Justification, as the requester wrote it:") + 1 :]
    assert quoted[:5] == [
        "> urgent",
        ">",
        "> Open the request: https://evil.example/login",
        "> --",
        "> GPU quota portal (request.submitted)[2J",
    ]
    # Only the portal's own lines are unquoted: its link once, and its signature last.
    unquoted = [line for line in lines if "evil.example" in line and not line.startswith("> ")]
    assert unquoted == []
    assert body.endswith("-- \nGPU quota portal (request.submitted)\n")
    assert not any(c in body for c in "\u202e\x1b\x07\r")


def test_email_body_reads_nested_line_values_too():
    line = {
        "cluster": "demo",
        "namespace": "team-a-training",
        "resource": "nvidia.com/gpu",
        "current": {"guarantee": "6", "cap": "10", "per_pod_max": None},
        "requested": {"guarantee": "8", "cap": "12", "per_pod_max": "4"},
        "decided": None,
    }
    body = email_body("request.submitted", {"id": 5, "lines": [line], "justification": "Q3"})
    assert (
        "- demo / team-a-training / nvidia.com/gpu: guarantee current 6, requested 8; "
        "cap current 10, requested 12; per pod max requested 4\n"
    ) in body
    assert "Justification, as the requester wrote it:\n> Q3\n" in body


def test_email_task_sends_from_the_portal_to_recipients(settings):
    settings.DEFAULT_FROM_EMAIL = "quota@example.com"
    send_email_task.apply(args=("request.applied", {"id": 4, "team": "team-b"}, ["x@example.com"]))
    [message] = mail.outbox
    assert message.subject == "[GPU quota] request #4 applied to the cluster (team-b)"
    assert message.from_email == "quota@example.com"
    assert message.to == ["x@example.com"]


def _mail_server_down_for(monkeypatch, tries: int) -> list[int]:
    """send_mail refuses the first ``tries`` calls as an unreachable SMTP server does."""
    calls = []
    real = notify_module.send_mail

    def send_mail(**kwargs):
        calls.append(1)
        if len(calls) <= tries:
            raise ConnectionRefusedError("SMTP server down")
        return real(**kwargs)

    monkeypatch.setattr(notify_module, "send_mail", send_mail)
    return calls


def test_email_task_retries_a_mail_server_down_then_sends_once(monkeypatch):
    calls = _mail_server_down_for(monkeypatch, tries=2)
    send_email_task.apply(args=("request.applied", {"id": 4}, ["x@example.com"])).get()
    assert len(calls) == 3
    assert [m.to for m in mail.outbox] == [["x@example.com"]]


def test_email_retries_wait_celerys_jittered_backoff(monkeypatch):
    """autoretry_for OSError, retry_backoff 10, retry_backoff_max 600, retry_jitter: retry n
    waits a random whole number of seconds from 0 to 10 * 2**n, at most 600."""
    asked = []

    def retry(*args, countdown=None, **kwargs):
        asked.append(countdown)
        return Ignore()

    monkeypatch.setattr(send_email_task, "retry", retry)
    _mail_server_down_for(monkeypatch, tries=10_000)
    for retries, ceiling in ((0, 10), (2, 40), (4, 160)):
        asked.clear()
        for _ in range(40):
            send_email_task.apply(
                args=("request.applied", {"id": 4}, ["x@example.com"]), retries=retries
            )
        assert all(isinstance(c, int) and 0 <= c <= ceiling for c in asked), asked
        assert len(asked) == 40 and len(set(asked)) > 1
    assert send_email_task.retry_backoff_max == 600


def test_webhook_waits_the_backoff_or_a_longer_retry_after(settings, monkeypatch):
    settings.WEBHOOK_SECRET = SECRET
    asked = []

    def retry(*args, countdown=None, **kwargs):
        asked.append(countdown)
        return Ignore()

    monkeypatch.setattr(send_webhook_task, "retry", retry)
    monkeypatch.setattr(notify_module, "_backoff", lambda retries: 5)
    with Receiver(statuses=[503]) as server:
        send_webhook_task.apply(args=(server.url, envelope()))
    with Receiver(statuses=[429], headers={"Retry-After": "120"}) as server:
        send_webhook_task.apply(args=(server.url, envelope()))
    with Receiver(statuses=[429], headers={"Retry-After": "86400"}) as server:
        send_webhook_task.apply(args=(server.url, envelope()))
    assert asked == [5, 120, 600]  # the backoff; the receiver's longer wait; at most the cap
    monkeypatch.undo()
    waits = [notify_module._backoff(3) for _ in range(40)]
    assert all(isinstance(w, int) and 0 <= w <= 80 for w in waits) and len(set(waits)) > 1


def test_email_task_gives_up_after_the_last_retry(monkeypatch):
    monkeypatch.setattr(send_email_task, "max_retries", 2)
    calls = _mail_server_down_for(monkeypatch, tries=10)
    result = send_email_task.apply(args=("request.applied", {"id": 4}, ["x@example.com"]))
    with pytest.raises(ConnectionRefusedError):
        result.get()
    assert len(calls) == 3
    assert mail.outbox == []


# --- on commit -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_nothing_is_sent_before_the_commit_and_everything_after(
    webhooks, eager, lead_a, admin, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        notify(
            event="request.decided",
            payload=PAYLOAD,
            recipients=[lead_a.email, "", admin.email, lead_a.email],
        )
        assert mail.outbox == []
        assert webhooks.requests == []
    assert len(callbacks) == 1

    [message] = mail.outbox
    assert message.to == [lead_a.email, admin.email]  # empty and repeated addresses dropped
    assert message.subject == "[GPU quota] request #12 approved (team-a)"
    requests = webhooks.wait_for(2)
    assert sorted(r["path"] for r in requests) == ["/hooks/a", "/hooks/b"]
    first, second = requests
    assert first["body"] == second["body"]  # one notification, one id, to every URL
    sent = json.loads(first["body"])
    assert sent["event"] == "request.decided"
    assert sent["data"] == {**PAYLOAD, "lines": [{**PAYLOAD["lines"][0], "current_guarantee": "6"}]}
    assert first["headers"]["X-Portal-Delivery"] == sent["id"]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_sends_nothing(webhooks, eager, lead_a):
    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        notify(event="request.decided", payload=PAYLOAD, recipients=[lead_a.email])
        raise Boom
    assert mail.outbox == []
    assert webhooks.requests == []

    # The same call in a committed transaction does send: the rollback, not the setup, held it.
    with transaction.atomic():
        notify(event="request.submitted", payload={"id": 13}, recipients=[lead_a.email])
    assert [m.subject for m in mail.outbox] == ["[GPU quota] request #13 submitted"]
    assert {json.loads(r["body"])["event"] for r in webhooks.wait_for(2)} == {"request.submitted"}


@pytest.mark.django_db
def test_no_recipients_and_no_urls_queue_nothing(
    settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_URLS = []
    queued = []
    monkeypatch.setattr(send_email_task, "delay", lambda *a: queued.append(("email", a)))
    monkeypatch.setattr(send_webhook_task, "delay", lambda *a: queued.append(("webhook", a)))
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        notify(event="request.expired", payload={"id": 1}, recipients=["", " "])
    assert len(callbacks) == 1
    assert queued == []


@pytest.mark.django_db
def test_urls_without_a_secret_send_no_webhook_and_log_one_error(
    settings, receiver, eager, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.INFO)
    monkeypatch.setattr(notify_module, "_missing_secret_logged", False)
    settings.WEBHOOK_URLS = [receiver.url]
    settings.WEBHOOK_SECRET = ""
    with django_capture_on_commit_callbacks(execute=True):
        notify(event="request.failed", payload={"id": 1}, recipients=["lead@example.com"])
        notify(event="request.failed", payload={"id": 2}, recipients=["lead@example.com"])
    assert len(mail.outbox) == 2  # e-mail still goes out
    assert receiver.requests == []
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "WEBHOOK_URLS is set but WEBHOOK_SECRET is empty: webhooks are not sent"
    ]
    # A task queued before the secret was removed refuses too.
    assert send_webhook_task.apply(args=(receiver.url, envelope())).get() == "refused"
    assert receiver.requests == []


@pytest.mark.django_db
def test_a_broken_broker_does_not_break_the_committed_decision(
    webhooks, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    def broker_down(*args, **kwargs):
        raise ConnectionError("broker down")

    caplog.set_level(logging.INFO)
    monkeypatch.setattr(send_email_task, "delay", broker_down)
    monkeypatch.setattr(send_webhook_task, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        notify(event="request.applied", payload={"id": 1}, recipients=["lead@example.com"])
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 3


# --- webhook delivery (eager: the task's decisions) ----------------------------------------


def test_webhook_posts_the_exact_signed_body(settings, receiver):
    settings.WEBHOOK_SECRET = SECRET
    body = envelope("request.applied", {"id": 7, "team": "team-a"})
    assert send_webhook_task.apply(args=(f"{receiver.url}/in", body)).get() == "delivered"
    [request] = receiver.requests
    assert request["body"] == body.encode()
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["headers"]["X-Portal-Event"] == "request.applied"
    assert request["headers"]["X-Portal-Delivery"] == "2b1f6c7e-0000-4000-8000-000000000001"
    signature = request["headers"]["X-Portal-Signature"]
    delivery = request["headers"]["X-Portal-Delivery"]
    assert verify_signature(request["body"], SECRET, signature, delivery_id=delivery)
    assert not verify_signature(request["body"], "not-the-secret", signature, delivery_id=delivery)


@pytest.mark.parametrize("failures", [[500, 500], [503, 429], [502]])
def test_webhook_retries_server_errors_and_429(settings, failures):
    settings.WEBHOOK_SECRET = SECRET
    with Receiver(statuses=failures) as server:
        assert send_webhook_task.apply(args=(server.url, envelope())).get() == "delivered"
    assert [r["status"] for r in server.requests] == [*failures, 200]
    assert len({r["body"] for r in server.requests}) == 1
    assert len({r["headers"]["X-Portal-Delivery"] for r in server.requests}) == 1
    # Each try is signed anew (a fresh timestamp) for the same delivery id.
    for r in server.requests:
        assert f",id={r['headers']['X-Portal-Delivery']}," in r["headers"]["X-Portal-Signature"]
        assert verify_signature(
            r["body"],
            SECRET,
            r["headers"]["X-Portal-Signature"],
            delivery_id=r["headers"]["X-Portal-Delivery"],
        )


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422, 302, 307])
def test_webhook_gives_up_at_once_on_4xx_and_redirects(settings, caplog, status):
    # Explicit level: a real worker started earlier in the session lowers the root logger's.
    caplog.set_level(logging.INFO)
    settings.WEBHOOK_SECRET = SECRET
    with Receiver(statuses=[status, status]) as server:
        assert send_webhook_task.apply(args=(f"{server.url}/in", envelope())).get() == "rejected"
    assert [(r["path"], r["status"]) for r in server.requests] == [("/in", status)]
    assert f"rejected with HTTP {status}: not retried" in caplog.text


def test_webhook_gives_up_after_the_last_retry(settings, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    settings.WEBHOOK_SECRET = SECRET
    monkeypatch.setattr(send_webhook_task, "max_retries", 2)
    with Receiver(statuses=[503] * 10) as server:
        assert send_webhook_task.apply(args=(server.url, envelope())).get() == "gave_up"
    assert len(server.requests) == 3
    assert "gave up after 3 tries: HTTP 503" in caplog.text


def test_webhook_retries_connection_errors_and_timeouts(settings, monkeypatch):
    settings.WEBHOOK_SECRET = SECRET
    settings.WEBHOOK_TIMEOUT = 0.2
    monkeypatch.setattr(send_webhook_task, "max_retries", 1)
    with Receiver(delay=2) as slow:
        assert send_webhook_task.apply(args=(slow.url, envelope())).get() == "gave_up"
        assert len(slow.requests) == 2
    closed = Receiver()  # bound, then closed: nothing listens on its port
    closed.server.server_close()
    assert send_webhook_task.apply(args=(closed.url, envelope())).get() == "gave_up"


def test_webhook_refuses_urls_that_are_not_http(settings, tmp_path):
    settings.WEBHOOK_SECRET = SECRET
    assert send_webhook_task.apply(args=(f"file://{tmp_path}/x", envelope())).get() == "refused"


def test_neither_secret_nor_signature_is_logged(settings, caplog):
    caplog.set_level(logging.DEBUG)
    settings.WEBHOOK_SECRET = SECRET
    body = envelope()
    with Receiver(statuses=[500, 429, 200]) as ok, Receiver(statuses=[403]) as refused:
        send_webhook_task.apply(args=(f"{ok.url}/t?token=abc", body))
        send_webhook_task.apply(args=(refused.url, body))
    assert "retry in" in caplog.text and "rejected" in caplog.text  # the logs were captured
    for record in caplog.records:
        text = record.getMessage()
        assert SECRET not in text
        assert "v1=" not in text
        assert "token=abc" not in text


# --- a real worker, through the broker -----------------------------------------------------


class TasksFollowed:
    """Every task message this process sends (the test's, and the in-process worker's retries)
    and every run of a task the worker finishes, per task id from Celery's own signals: when
    each id has finished as many runs as messages were sent for it (a retry is a second message
    of the same id), every message that was queued has been handled. Per id, not in total: a
    run that finishes late but was sent before, such as the worker's ping, must not stand in
    for one still queued."""

    def __init__(self):
        self.sent_ids: Counter[str] = Counter()
        self.finished_ids: Counter[str] = Counter()
        self._changed = threading.Condition()

    @property
    def sent(self) -> int:
        return self.sent_ids.total()

    def _left(self) -> int:
        return sum(max(n - self.finished_ids[i], 0) for i, n in self.sent_ids.items())

    def _on_sent(self, headers=None, body=None, **kwargs):
        task_id = (headers or {}).get("id") or (body or {}).get("id")
        with self._changed:
            self.sent_ids[task_id] += 1
            self._changed.notify_all()

    def _on_finished(self, task_id=None, **kwargs):
        with self._changed:
            self.finished_ids[task_id] += 1
            self._changed.notify_all()

    def wait_all_done(self, timeout: float = 60) -> None:
        with self._changed:
            done = self._changed.wait_for(lambda: not self._left(), timeout=timeout)
            left = self._left()
        assert done, f"{self.sent} task messages sent, {left} not handled after {timeout} s"


@pytest.fixture
def tasks_followed():
    followed = TasksFollowed()
    after_task_publish.connect(followed._on_sent, weak=False)
    task_postrun.connect(followed._on_finished, weak=False)
    try:
        yield followed
    finally:
        after_task_publish.disconnect(followed._on_sent)
        task_postrun.disconnect(followed._on_finished)


@pytest.fixture
def worker():
    app.loader.import_module("celery.contrib.testing.tasks")
    with start_worker(app, pool="solo", perform_ping_check=True, shutdown_timeout=30) as w:
        yield w


@pytest.mark.django_db(transaction=True)
def test_real_worker_retries_two_500s_then_delivers_once(settings, fast_retries, worker):
    settings.WEBHOOK_SECRET = SECRET
    with Receiver(statuses=[500, 500]) as server:
        result = send_webhook_task.delay(f"{server.url}/in", envelope())
        assert result.get(timeout=60) == "delivered"
    assert [r["status"] for r in server.requests] == [500, 500, 200]
    assert all(
        verify_signature(
            r["body"],
            SECRET,
            r["headers"]["X-Portal-Signature"],
            delivery_id=r["headers"]["X-Portal-Delivery"],
        )
        for r in server.requests
    )


@pytest.mark.django_db(transaction=True)
def test_real_worker_sends_what_was_committed_and_nothing_rolled_back(
    webhooks, fast_retries, worker, tasks_followed, lead_a
):
    with pytest.raises(RuntimeError), transaction.atomic():
        notify(event="request.decided", payload=PAYLOAD, recipients=[lead_a.email])
        raise RuntimeError("decision failed")
    with transaction.atomic():
        notify(event="request.expired", payload={"id": 12}, recipients=[lead_a.email])
    # Wait until the worker has handled every task message sent (the file broker does not keep
    # the order of messages queued within a millisecond, so "the first ones delivered" proves
    # nothing about the others); a rolled-back notification would have sent one too.
    assert tasks_followed.sent >= 3  # the committed event's e-mail and two webhooks
    tasks_followed.wait_all_done()
    assert [json.loads(r["body"])["event"] for r in webhooks.requests] == ["request.expired"] * 2
    assert [m.subject for m in mail.outbox] == ["[GPU quota] request #12 expired"]


@pytest.mark.django_db
def test_each_notification_anchors_the_audit_log_and_carries_the_anchor(
    webhooks, settings, tmp_path, monkeypatch, django_capture_on_commit_callbacks, admin, cluster
):
    from quotas.audit.chain import audit_record

    settings.AUDIT_ANCHOR_FILE = str(tmp_path / "anchors.jsonl")
    event = audit_record(acting_user=admin, action="cluster.sync_mode", target=cluster)
    queued = []
    monkeypatch.setattr(send_webhook_task, "delay", lambda url, body: queued.append(body))
    with django_capture_on_commit_callbacks(execute=True):
        notify(event="request.applied", payload={"id": 1}, recipients=[])

    [line] = (tmp_path / "anchors.jsonl").read_text().splitlines()
    anchor = json.loads(line)
    assert (anchor["seq"], anchor["mac"]) == (1, event.mac)
    assert anchor["reason"] == f"webhook {json.loads(queued[0])['id']}"
    # Both URLs get the same body, which carries the anchor to the receivers.
    assert len(queued) == 2 and len(set(queued)) == 1
    assert json.loads(queued[0])["audit_anchor"] == {"seq": 1, "mac": event.mac}
