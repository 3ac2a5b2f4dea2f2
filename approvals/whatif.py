"""A request's what-if: each line's last month replayed under the values the request would put
in force (usage/whatif.py), beside the month as it was; for the request page and the API's
preview. An extension changes no amounts and has none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from approvals.models import RequestLine
from common.amounts import rounded
from usage.units import HourLabels, hour_labels
from usage.whatif import Replay, WhatIf, what_ifs


def proposed_values(line: RequestLine) -> tuple[Decimal, Decimal]:
    """The guarantee and cap the line would put in force: as decided, else as requested."""
    guarantee = line.decided_guarantee
    cap = line.decided_cap
    return (
        line.requested_guarantee if guarantee is None else guarantee,
        line.requested_cap if cap is None else cap,
    )


def _hours(value: Decimal) -> Decimal:
    return rounded(value, "0.1")


def _percent(share: Decimal | None) -> int | None:
    return None if share is None else int(rounded(share * 100, "1"))


@dataclass(frozen=True)
class ReplayFigures:
    """A replay as shown: unit-hours to one decimal, shares in whole percent."""

    demand: Decimal
    covered_percent: int | None
    borrowed: Decimal
    blocked: Decimal
    idle: Decimal
    idle_percent: int | None

    @classmethod
    def of(cls, replay: Replay) -> ReplayFigures:
        return cls(
            demand=_hours(replay.demand),
            covered_percent=_percent(replay.covered_share),
            borrowed=_hours(replay.borrowed),
            blocked=_hours(replay.blocked),
            idle=_hours(replay.idle),
            idle_percent=_percent(replay.idle_share),
        )


@dataclass(frozen=True)
class LineWhatIf:
    key: str  # the line's id, or for a line being typed "new-<position>"
    line: RequestLine
    labels: HourLabels
    what_if: WhatIf | None
    was: ReplayFigures | None
    proposed: ReplayFigures | None

    @property
    def guarantee(self) -> Decimal:
        return proposed_values(self.line)[0]

    @property
    def cap(self) -> Decimal:
        return proposed_values(self.line)[1]


def lines_what_if(
    lines: Sequence[RequestLine],
    *,
    extension: bool = False,
    saved: bool = True,
    now: datetime | None = None,
) -> list[LineWhatIf]:
    """The what-if of each line (with its team_namespace and resource), in the lines' order;
    empty for an extension. A line without samples in the window has what_if None. Lines of
    a check (``saved=False``: the form's or a suggestion's, whose ids, if any, are a rolled
    back trial's) are named by their position instead."""
    if extension or not lines:
        return []
    answers = what_ifs(
        [(line.team_namespace_id, line.resource_id, *proposed_values(line)) for line in lines],
        now=now,
    )
    return [
        LineWhatIf(
            key=str(line.pk) if saved and line.pk else f"new-{index}",
            line=line,
            labels=hour_labels(kind=line.resource.kind, unit=line.resource.unit),
            what_if=answer,
            was=ReplayFigures.of(answer.was) if answer else None,
            proposed=ReplayFigures.of(answer.proposed) if answer else None,
        )
        for index, (line, answer) in enumerate(zip(lines, answers, strict=True))
    ]
