"""The discussion on a request: comments by the leads of its team and the platform admins,
before the decision and after it, each one in the audit chain as it was written.

A comment decides nothing, so it is not a transition; it is an audited action on the request
all the same (``request.comment``, the text as the event's comment), so the audit log and the
request's ETag show it, and the other side is told (approvals.notify: a lead's comment goes
to the admins, an admin's to the team).
"""

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from approvals.access import require
from approvals.locks import lock_request
from approvals.models import COMMENT_MAX_LENGTH, QuotaRequest, RequestComment
from approvals.notify import notify_request
from approvals.notify.mail import unsafe_characters
from common.errors import ValidationFailed
from quotas.audit.chain import audit_record


def comment_text_check(text: str) -> str:
    """The text as stored (line breaks as LF, outer blanks stripped), or the refusal naming
    the field and the rule: empty, too long, or control and bidirectional characters (they
    make a text read otherwise than it is stored)."""
    if not isinstance(text, str):
        raise ValidationFailed(_("text: a comment is text"), field="text")
    cleaned = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not cleaned:
        raise ValidationFailed(_("text: a comment must not be empty"), field="text")
    if len(cleaned) > COMMENT_MAX_LENGTH:
        raise ValidationFailed(
            _("text: a comment has at most %(max)s characters (this one has %(n)s)")
            % {"max": COMMENT_MAX_LENGTH, "n": len(cleaned)},
            field="text",
        )
    found = unsafe_characters(cleaned)
    if found:
        raise ValidationFailed(
            _("text: control or text-direction characters are not allowed (%(found)s)")
            % {"found": ", ".join(found)},
            field="text",
            extra={"characters": found},
        )
    return cleaned


def request_comment_add(*, request: QuotaRequest, acting_user: User, text: str) -> RequestComment:
    """A lead of the request's team or a platform admin adds a comment, in any status."""
    require(acting_user, request, "comment")
    cleaned = comment_text_check(text)
    with transaction.atomic():
        # In line with the decisions on the request (the audit head stays the last lock).
        request = lock_request(request.pk)
        comment = RequestComment.objects.create(request=request, author=acting_user, text=cleaned)
        audit_record(
            acting_user=acting_user,
            action="request.comment",
            target=request,
            after={"comment": comment.pk, "status": request.status},
            comment=cleaned,
        )
        if request.status == QuotaRequest.Status.DRAFT:
            return comment  # a draft is nobody else's business yet: nobody is told
        notify_request(
            request,
            "request.commented",
            author=acting_user,
            comment=cleaned,
            commented_by=acting_user.get_username(),
        )
    return comment


def request_comments(request: QuotaRequest) -> QuerySet[RequestComment]:
    """The discussion in time order, with the authors' names."""
    return (
        RequestComment.objects.filter(request=request)
        .select_related("author")
        .order_by("created_at", "id")
    )
