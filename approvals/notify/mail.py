"""What a notification's e-mail says: its subject and plain-text body."""

from django.utils.text import capfirst
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext as _

from quotas.texts import LIST_SEPARATOR

# E-mails are written in the portal's default language (PORTAL_DEFAULT_LANGUAGE): the
# recipients' own is not known. Webhook payloads carry codes, never text to translate.

# What the subject says happened, per event; request.decided uses the decision instead.
_SUBJECT_VERBS = {
    "request.submitted": gettext_noop("submitted"),
    "request.applied": gettext_noop("applied to the cluster"),
    "request.failed": gettext_noop("failed to apply"),
    "request.expiring": gettext_noop("expires soon"),
    "request.expired": gettext_noop("expired"),
    "request.withdrawn": gettext_noop("withdrawn by its requester"),
    "request.revoked": gettext_noop("revoked by an admin"),
}
_DECISION_VERBS = {
    "approved": gettext_noop("approved"),
    "rejected": gettext_noop("rejected"),
    "changes_requested": gettext_noop("changes requested"),
}
# Optional payload keys shown in the e-mail body, in this order, with their labels: first the
# portal's own facts, then what people (or a cluster's API) wrote, quoted.
_FACT_FIELDS = (
    ("requested_by", gettext_noop("Requested by")),
    ("decided_by", gettext_noop("Decided by")),
    ("starts_at", gettext_noop("Starts")),
    ("ends_at", gettext_noop("Ends")),
    ("expires_at", gettext_noop("Expires")),
)
_QUOTED_FIELDS = (
    ("justification", gettext_noop("Justification, as the requester wrote it")),
    ("decision_comment", gettext_noop("Comment, as written")),
    ("comment", gettext_noop("Comment, as written")),
    ("reason", gettext_noop("Reason, as written")),
    ("error", gettext_noop("Error, as reported")),
)
# Dropped from anything shown in a mail: C0/C1 control characters but line breaks and tabs,
# and the bidirectional controls that make text read in another order than it is stored.
_UNSAFE = dict.fromkeys(
    [
        *(c for c in range(0x20) if c not in (0x09, 0x0A)),
        *range(0x7F, 0xA0),
        0x061C,
        0x200E,
        0x200F,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
)

# The values of a line in the body: "guarantee current 6, requested 8".
_LINE_FIELDS = {
    "guarantee": gettext_noop("guarantee"),
    "cap": gettext_noop("cap"),
    "per_pod_max": gettext_noop("per pod max"),
}
_LINE_STAGES = {
    "current": gettext_noop("current %(value)s"),
    "requested": gettext_noop("requested %(value)s"),
    "decided": gettext_noop("decided %(value)s"),
}


# The values of a team.near_cap notification its subject names.
_NEAR_CAP_FIELDS = ("team", "used", "cap", "resource", "namespace", "cluster")


def _what_happened(event: str, payload: dict) -> str:
    """``request #12 approved (team-a)``, with the parts the payload has."""
    if event == "team.near_cap":
        return _(
            "%(team)s near its cap: %(used)s of %(cap)s %(resource)s in %(namespace)s on "
            "%(cluster)s"
        ) % {k: safe_text(payload.get(k, "")) for k in _NEAR_CAP_FIELDS}
    if event == "request.decided":
        status = str(payload.get("status", "decided"))
        verb = gettext(_DECISION_VERBS[status]) if status in _DECISION_VERBS else status
    else:
        verb = gettext(_SUBJECT_VERBS[event]) if event in _SUBJECT_VERBS else event
    values = {"id": payload.get("id"), "what": verb, "team": payload.get("team")}
    if values["id"] is not None and values["team"]:
        return _("request #%(id)s %(what)s (%(team)s)") % values
    if values["id"] is not None:
        return _("request #%(id)s %(what)s") % values
    if values["team"]:
        return _("request %(what)s (%(team)s)") % values
    return _("request %(what)s") % values


def email_subject(event: str, payload: dict) -> str:
    """``[GPU quota] request #12 approved (team-a)``, with the parts the payload has."""
    return _("[GPU quota] %(what)s") % {"what": _what_happened(event, payload)}


def safe_text(value: object) -> str:
    """``value`` as text without control or bidirectional characters; line breaks kept (CR LF
    and a lone CR become LF)."""
    text = str(value).replace("\r\n", "\n").replace("\r", "\n")
    return text.translate(_UNSAFE)


def email_body(event: str, payload: dict) -> str:
    """Plain text, the portal's facts first: what happened, the link, each line's current,
    requested and decided values, who and when; then what people wrote, as quoted lines
    ("> "), without control or bidirectional characters, so no text of theirs can pass for the
    portal's own (a link, a signature)."""
    parts = [_("%(what)s.") % {"what": capfirst(_what_happened(event, payload))}]
    if event == "team.near_cap":
        parts.append(
            _(
                "Pods that would take it beyond the cap wait as pending. If the team needs "
                "more, ask for it on the portal."
            )
        )
        if payload.get("url"):
            parts.append(_("Open the team's dashboard: %(url)s") % {"url": payload["url"]})
    elif payload.get("url"):
        parts.append(_("Open the request: %(url)s") % {"url": payload["url"]})
    lines = payload.get("lines") or []
    if lines:
        parts.append("")
        parts.append(_("Lines:"))
        parts.extend(f"- {_describe_line(line)}" for line in lines)
    facts = [
        _("%(label)s: %(value)s") % {"label": gettext(label), "value": safe_text(payload[key])}
        for key, label in _FACT_FIELDS
        if payload.get(key) not in (None, "")
    ]
    if facts:
        parts.append("")
        parts.extend(facts)
    for key, label in _QUOTED_FIELDS:
        if payload.get(key) in (None, ""):
            continue
        parts.append("")
        parts.append(_("%(label)s:") % {"label": gettext(label)})
        parts.extend(f"> {line}".rstrip() for line in safe_text(payload[key]).split("\n"))
    parts.append("")
    parts.append("-- \n" + _("GPU quota portal (%(event)s)") % {"event": event})
    return "\n".join(parts) + "\n"


def _describe_line(line: dict) -> str:
    """``demo / team-a-training / nvidia.com/gpu: guarantee current 6, requested 8; cap ...``.

    Reads the values nested (``line["current"]["guarantee"]``) or flat (``current_guarantee``).
    """
    where = " / ".join(str(line[k]) for k in ("cluster", "namespace", "resource") if line.get(k))
    values = []
    for field, field_label in _LINE_FIELDS.items():
        known = []
        for stage, stage_label in _LINE_STAGES.items():
            nested = line.get(stage)
            value = nested.get(field) if isinstance(nested, dict) else line.get(f"{stage}_{field}")
            if value is not None:
                known.append(gettext(stage_label) % {"value": value})
        if known:
            values.append(f"{gettext(field_label)} " + gettext(", ").join(known))
    where = where or _("line")
    return f"{where}: {gettext(LIST_SEPARATOR).join(values)}" if values else where
