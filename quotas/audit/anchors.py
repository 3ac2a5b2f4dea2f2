"""Anchors of the audit log: its head (seq, hash, MAC) written outside the database.

Someone who can change the database can empty the audit tables or rewrite them; the anchors they
cannot reach still record how far the log went and the MAC it had there. Each anchor is one JSON
line appended (and fsynced) to AUDIT_ANCHOR_FILE and logged by the ``quotas.audit.anchor``
logger, so log shipping keeps a copy too; ``verify_audit_chain`` reads either back.
"""

import datetime
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from quotas.models.audit import AuditEvent

log = logging.getLogger(__name__)
anchor_log = logging.getLogger("quotas.audit.anchor")

# The marker before the JSON in a log line, so anchors can be picked out of a whole log.
LOG_MARKER = "audit-anchor"


@dataclass(frozen=True)
class Anchor:
    seq: int
    hash: str
    mac: str
    key_id: str
    at: str
    reason: str
    source: str = ""  # where it was read: "file:line"

    def as_json(self) -> str:
        return json.dumps(
            {
                "anchor": "audit",
                "seq": self.seq,
                "hash": self.hash,
                "mac": self.mac,
                "key_id": self.key_id,
                "at": self.at,
                "reason": self.reason,
            },
            separators=(",", ":"),
        )


class AnchorFileError(ValueError):
    """An anchor source that cannot be read or holds a line that is not an anchor."""


def audit_anchor_current(*, reason: str) -> Anchor | None:
    """The anchor of the log as committed now (None while the log is empty)."""
    last = AuditEvent.objects.order_by("-seq").values("seq", "hash", "mac", "mac_key_id").first()
    if last is None:
        return None
    return Anchor(
        seq=last["seq"],
        hash=last["hash"],
        mac=last["mac"],
        key_id=last["mac_key_id"],
        at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        reason=reason,
    )


def audit_anchor_write(*, reason: str, path: str | None = None) -> Anchor | None:
    """Write the current head to the log stream and, when configured, the anchor file.

    Never raises: it runs in beat and after notifications, whose work must not fail on it; a
    write that fails is logged as an error (a gap in the anchors is visible, not fatal).
    """
    from django.conf import settings

    try:
        anchor = audit_anchor_current(reason=reason)
    except Exception:
        log.exception("audit anchor (%s): could not read the head of the audit log", reason)
        return None
    if anchor is None:
        return None
    line = anchor.as_json()
    anchor_log.info("%s %s", LOG_MARKER, line)
    target = settings.AUDIT_ANCHOR_FILE if path is None else path
    if target:
        try:
            _append_line(Path(target), line)
        except OSError as exc:
            log.error("audit anchor (%s): cannot append to %s: %s", reason, target, exc.strerror)
    return anchor


ANCHOR_FILE_MODE = 0o600  # of a file this creates: the owner's alone


def _append_line(path: Path, line: str) -> None:
    # O_APPEND: one write() per line lands whole at the end, even with several writers.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, ANCHOR_FILE_MODE)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def audit_anchors_read(paths: Iterable[str | os.PathLike[str]]) -> list[Anchor]:
    """Every anchor in the files: anchor files, or logs holding ``audit-anchor {...}`` lines.

    In a log, lines without the marker are skipped; in an anchor file (every line JSON) a line
    that is not an anchor is an error: the file was edited.
    """
    anchors: list[Anchor] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                anchors.extend(_parse(fh, str(path)))
        except FileNotFoundError:
            continue  # nothing anchored yet
        except OSError as exc:
            raise AnchorFileError(f"cannot read anchors from {path}: {exc.strerror}") from None
    return anchors


def _parse(lines: Iterable[str], name: str) -> Iterator[Anchor]:
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        if not text.startswith("{"):
            marker = text.find(LOG_MARKER + " {")
            if marker < 0:
                continue  # another log line
            text = text[marker + len(LOG_MARKER) + 1 :]
        try:
            data = json.loads(text)
            if data.get("anchor") != "audit":
                raise ValueError("not an audit anchor")
            yield Anchor(
                seq=int(data["seq"]),
                hash=str(data["hash"]),
                mac=str(data["mac"]),
                key_id=str(data.get("key_id", "")),
                at=str(data.get("at", "")),
                reason=str(data.get("reason", "")),
                source=f"{name}:{number}",
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            raise AnchorFileError(f"{name}:{number}: not an audit anchor line") from None
