"""Safe updates of quota requests: an ``ETag`` per request and ``If-Match`` on revise and decide.

The tag is the request's id and the sequence number of the last audit event written about it
(``"request-12-345"``): every change of a request is a transition or an action audited in the
same transaction, so the tag moves with every change, and a stale tag can say what changed
since (the audit events after it). ``If-Match`` is optional: without it a write goes through as
before. With it, the tag is compared with the request row locked (in the services' lock order),
so no change can slip in between the check and the write.
"""

import re

from django.db.models import Max
from django.utils.translation import gettext as _

from approvals.models import QuotaRequest
from common.errors import ApplicationError
from quotas.models import AuditEvent

_TAG = re.compile(r'^"request-(\d+)-(\d+)"$')


class PreconditionFailed(ApplicationError):
    status_code = 412


def _events(request_id: int):
    return AuditEvent.objects.filter(
        target_type=QuotaRequest.__name__, target_id=str(request_id)
    ).order_by("seq")


def request_etag(request_id: int) -> str:
    seq = _events(request_id).aggregate(last=Max("seq"))["last"] or 0
    return f'"request-{request_id}-{seq}"'


def if_match_tags(header: str | None) -> list[str] | None:
    """The entity tags of an If-Match header (None: no header)."""
    if header is None:
        return None
    return [tag.strip() for tag in header.split(",") if tag.strip()]


def request_if_match(*, request_id: int, header: str | None) -> None:
    """Refuse (412) when If-Match names none of the request's current tag; call with the
    request row locked. The message lists what changed since the newest tag given."""
    tags = if_match_tags(header)
    if tags is None or "*" in tags:
        return
    current = request_etag(request_id)
    if current in tags:
        return
    seen = [int(m.group(2)) for t in tags if (m := _TAG.match(t)) and int(m.group(1)) == request_id]
    since = max(seen, default=None)
    changes = [
        {
            "seq": e.seq,
            "action": e.action,
            "actor": e.actor_username or None,
            "at": e.created_at.isoformat(),
            "comment": e.comment,
        }
        for e in (_events(request_id).filter(seq__gt=since) if since is not None else [])
    ]
    if changes:
        said = _("; ").join(
            _("%(action)s by %(actor)s at %(at)s")
            % {"action": c["action"], "actor": c["actor"] or _("the portal"), "at": c["at"][:19]}
            for c in changes
        )
        message = _("If-Match: request #%(id)s changed since your copy: %(changes)s") % {
            "id": request_id,
            "changes": said,
        }
    else:
        message = _(
            "If-Match: %(header)s is not a tag of request #%(id)s (its current tag is "
            "%(etag)s); read it again"
        ) % {"header": repr(header), "id": request_id, "etag": current}
    raise PreconditionFailed(
        message,
        field="If-Match",
        extra={"code": "stale", "etag": current, "changes": changes},
    )
