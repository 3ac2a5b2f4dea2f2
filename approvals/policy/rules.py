"""Who must decide a request: pure rules from every field the request changes and the cluster
policy (thresholds, and the auto-approval budget a team has left).

Reasons are :class:`~quotas.texts.Text`: ``PolicyDecision.reason`` is the active language's,
``reason_english`` the one stored, ``text`` renders it again in the reader's language."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from django.utils.translation import gettext_noop

from common.amounts import format_amount
from quotas.texts import Text

DEFAULT_AUTO_APPROVE_DECREASES = True
DEFAULT_AUTO_APPROVE_INCREASE_MAX = Decimal(1)
DEFAULT_TWO_ADMINS_ABOVE = Decimal(4)
# What one team may get automatically on one cluster per period, summed over its requests,
# so small steps cannot walk a team up to every free GPU without an admin.
DEFAULT_AUTO_APPROVE_BUDGET = Decimal(2)
DEFAULT_AUTO_APPROVE_PERIOD_DAYS = 30
# A class valued above every class the allocation allows lets the team preempt (or jump the
# queue of) other teams: by default as weighty as a large increase.
DEFAULT_TWO_ADMINS_FOR_HIGHER_CLASS = True


@dataclass(frozen=True)
class PolicyFacts:
    auto_approve_decreases: bool = DEFAULT_AUTO_APPROVE_DECREASES
    auto_approve_increase_max: Decimal = DEFAULT_AUTO_APPROVE_INCREASE_MAX
    two_admins_above: Decimal = DEFAULT_TWO_ADMINS_ABOVE
    auto_approve_budget: Decimal = DEFAULT_AUTO_APPROVE_BUDGET
    auto_approve_period_days: int = DEFAULT_AUTO_APPROVE_PERIOD_DAYS
    two_admins_for_higher_class: bool = DEFAULT_TWO_ADMINS_FOR_HIGHER_CLASS


@dataclass(frozen=True)
class LineDelta:
    """One allocation before and after a request: every field the policy judges.

    An empty set of priority classes means no class restriction (every class allowed); no
    per-pod max means any pod size up to the cap. An allocation with a cap of 0 (none yet
    counts as one: 0 guarantee, 0 cap) allows nothing, whatever classes it lists: a line that
    gives it a cap is judged field by field from nothing. Its guarantee and cap are increases
    from 0 and its pod size is bounded by the new cap, but every class it allows is new: one
    above the cluster's lowest class outranks (no classes at all is the widest of all).
    """

    cluster: str
    guarantee_before: Decimal
    guarantee_after: Decimal
    cap_before: Decimal
    cap_after: Decimal
    per_pod_max_before: Decimal | None = None
    per_pod_max_after: Decimal | None = None
    classes_before: frozenset[str] = frozenset()
    classes_after: frozenset[str] = frozenset()
    where: str = ""
    # Priority values of the known classes, to say when an added class outranks the allowed.
    class_values: Mapping[str, int] = field(default_factory=dict, compare=False)

    @property
    def increase(self) -> Decimal:
        """The larger of the guarantee and cap increases (0 for a decrease)."""
        return max(
            Decimal(0),
            self.guarantee_after - self.guarantee_before,
            self.cap_after - self.cap_before,
        )

    @property
    def guarantee_increase(self) -> Decimal:
        return max(Decimal(0), self.guarantee_after - self.guarantee_before)

    @property
    def allows_nothing_before(self) -> bool:
        """No pod may use the resource yet: no allocation, or a cap of 0."""
        return self.cap_before <= 0

    def _classes_from_nothing(self) -> list[tuple[Text, bool]]:
        """The classes a line allows where none is allowed yet, each a widening; one outranks
        (lets the team preempt others) unless it is the lowest class of the cluster, below
        which there is nothing to preempt. A class the cluster does not know outranks."""
        if self.cap_after <= 0:
            return []  # still nothing allowed
        lowest = min(self.class_values.values(), default=None)
        if not self.classes_after:
            known = sorted(self.class_values.items(), key=lambda item: (-item[1], item[0]))
            if not known:
                return [
                    (Text.of(gettext_noop("allows every priority class (none allowed yet)")), False)
                ]
            text = Text.of(
                gettext_noop("allows every priority class, up to %(class)s (none allowed yet)"),
                **{"class": known[0][0]},
            )
            return [(text, known[0][1] > lowest)]
        found = []
        for name in sorted(self.classes_after):
            value = self.class_values.get(name)
            text = Text.of(
                gettext_noop("allows priority class %(class)s (none allowed yet)"),
                **{"class": name},
            )
            found.append((text, value is None or value > lowest))
        return found

    def _widening_items(self) -> list[tuple[Text, bool]]:
        """(what the line allows beyond amounts, whether it outranks the allowed classes)."""
        found: list[tuple[Text, bool]] = []
        before, after = self.per_pod_max_before, self.per_pod_max_after
        if before is not None and after is None:
            text = Text.of(
                gettext_noop("removes the per-pod max (was %(before)s)"),
                before=format_amount(before),
            )
            found.append((text, False))
        elif before is not None and after is not None and after > before:
            text = Text.of(
                gettext_noop("raises the per-pod max from %(before)s to %(after)s"),
                before=format_amount(before),
                after=format_amount(after),
            )
            found.append((text, False))
        if self.allows_nothing_before:
            found += self._classes_from_nothing()
        elif self.classes_before and not self.classes_after:
            allowed = ", ".join(sorted(self.classes_before))
            above = self._above_allowed()
            if above:
                text = Text.of(
                    gettext_noop(
                        "removes the priority-class restriction (was: %(allowed)s), "
                        "allowing %(class)s%(outranks)s"
                    ),
                    allowed=allowed,
                    **{"class": above[0], "outranks": self._outranks(above[0])},
                )
            else:
                text = Text.of(
                    gettext_noop("removes the priority-class restriction (was: %(allowed)s)"),
                    allowed=allowed,
                )
            found.append((text, bool(above)))
        elif self.classes_before:
            for name in sorted(self.classes_after - self.classes_before):
                outranks = self._outranks(name)
                text = Text.of(
                    gettext_noop("adds priority class %(class)s%(outranks)s"),
                    **{"class": name, "outranks": outranks},
                )
                found.append((text, bool(outranks)))
        if not self.where:
            return found
        return [
            (Text.of(gettext_noop("%(change)s on %(where)s"), change=text, where=self.where), up)
            for text, up in found
        ]

    @property
    def widening_texts(self) -> list[Text]:
        """What the line allows beyond amounts: larger pods, more priority classes."""
        return [text for text, _ in self._widening_items()]

    @property
    def widenings(self) -> list[str]:
        """:attr:`widening_texts` in the active language."""
        return [str(text) for text in self.widening_texts]

    @property
    def outranking_texts(self) -> list[Text]:
        """The widenings that allow a class valued above every class allowed now."""
        return [text for text, up in self._widening_items() if up]

    @property
    def outranking(self) -> list[str]:
        return [str(text) for text in self.outranking_texts]

    def _top_allowed(self) -> tuple[int, str] | None:
        allowed = [(self.class_values[c], c) for c in self.classes_before if c in self.class_values]
        return max(allowed) if allowed else None

    def _above_allowed(self) -> list[str]:
        """Known classes valued above the highest allowed now, highest first."""
        top = self._top_allowed()
        if top is None:
            return []
        above = [(v, n) for n, v in self.class_values.items() if v > top[0]]
        return [n for _, n in sorted(above, reverse=True)]

    def _outranks(self, name: str) -> Text | str:
        value = self.class_values.get(name)
        top = self._top_allowed()
        if value is None or top is None:
            return ""
        top_value, top_name = top
        if value <= top_value:
            return ""
        return Text.of(
            gettext_noop(
                " (value %(value)s, above %(top)s %(top_value)s, the highest it allows now)"
            ),
            value=value,
            top=top_name,
            top_value=top_value,
        )

    @property
    def is_decrease_only(self) -> bool:
        return (
            self.guarantee_after <= self.guarantee_before
            and self.cap_after <= self.cap_before
            and not self._widening_items()
        )


@dataclass(frozen=True)
class PolicyDecision:
    auto_approve: bool
    approvals_needed: int
    text: Text

    @property
    def reason(self) -> str:
        """Why, in the active language."""
        return str(self.text)

    @property
    def reason_english(self) -> str:
        """Why, as audit rows and the request store it."""
        return self.text.english()


def decide_policy(
    lines: Sequence[LineDelta],
    policies: Mapping[str, PolicyFacts],
    *,
    plan_has_errors: bool,
    budget_used: Mapping[str, Decimal] | None = None,
    team: str | None = None,
) -> PolicyDecision:
    """Auto-approve what is safe, else one admin, or two above the threshold.

    A request touching several clusters gets the strictest of their policies. Nothing with a
    validation error is auto-approved (it is refused at submit anyway). Widening a line
    (larger pods, more priority classes, no restriction) always waits for an admin. Increases
    are approved automatically only while the team's budget on the cluster (``budget_used``:
    what was approved automatically in the policy's period) allows.
    """
    if not lines:
        return PolicyDecision(False, 1, Text.of(gettext_noop("nothing to change")))

    def policy(line: LineDelta) -> PolicyFacts:
        return policies.get(line.cluster, PolicyFacts())

    needs_two = [line for line in lines if line.increase > policy(line).two_admins_above]
    if needs_two:
        biggest = max(needs_two, key=lambda line: line.increase)
        return PolicyDecision(
            False,
            2,
            Text.of(
                gettext_noop(
                    "an increase of %(increase)s on %(cluster)s is above %(threshold)s: "
                    "two admins must approve"
                ),
                increase=format_amount(biggest.increase),
                cluster=biggest.cluster,
                threshold=format_amount(policy(biggest).two_admins_above),
            ),
        )
    outranking = tuple(
        text
        for line in lines
        if policy(line).two_admins_for_higher_class
        for text in line.outranking_texts
    )
    if outranking:
        return PolicyDecision(
            False,
            2,
            Text.of(
                gettext_noop(
                    "%(changes)s: a higher priority class lets the team preempt others, "
                    "two admins must approve"
                ),
                changes=outranking,
            ),
        )
    if plan_has_errors:
        return PolicyDecision(False, 1, Text.of(gettext_noop("the plan has errors")))
    widenings = tuple(text for line in lines for text in line.widening_texts)
    if widenings:
        return PolicyDecision(
            False,
            1,
            Text.of(gettext_noop("%(changes)s: a platform admin must approve"), changes=widenings),
        )
    if all(line.is_decrease_only and policy(line).auto_approve_decreases for line in lines):
        return PolicyDecision(
            True, 0, Text.of(gettext_noop("only decreases: approved automatically"))
        )
    small = all(
        (line.is_decrease_only and policy(line).auto_approve_decreases)
        or (
            policy(line).auto_approve_increase_max > 0
            and line.increase <= policy(line).auto_approve_increase_max
        )
        for line in lines
    )
    if not small:
        return PolicyDecision(False, 1, Text.of(gettext_noop("one platform admin must approve")))
    used = budget_used or {}
    for cluster in sorted({line.cluster for line in lines}):
        facts = policies.get(cluster, PolicyFacts())
        asked = sum((line.increase for line in lines if line.cluster == cluster), Decimal(0))
        spent = used.get(cluster, Decimal(0))
        if asked > 0 and spent + asked > facts.auto_approve_budget:
            return PolicyDecision(
                False,
                1,
                Text.of(
                    gettext_noop(
                        "the auto-approval budget of %(team)s on %(cluster)s is %(budget)s per "
                        "%(days)s days; %(spent)s was approved automatically already and this "
                        "request adds %(asked)s: a platform admin must approve"
                    ),
                    team=team if team else Text(gettext_noop("the team")),
                    cluster=cluster,
                    budget=format_amount(facts.auto_approve_budget),
                    days=facts.auto_approve_period_days,
                    spent=format_amount(spent),
                    asked=format_amount(asked),
                ),
            )
    return PolicyDecision(
        True,
        0,
        Text.of(gettext_noop("small increase within free capacity: approved automatically")),
    )


def hold_for_waiting(decision: PolicyDecision, blocked: Sequence[Text | str]) -> PolicyDecision:
    """An auto-approval that would leave requests waiting for an admin unable to fit waits too."""
    if not decision.auto_approve or not blocked:
        return decision
    return PolicyDecision(
        False,
        1,
        Text.of(
            gettext_noop(
                "approving it automatically would leave %(blocked)s: a platform admin must decide"
            ),
            blocked=tuple(b if isinstance(b, Text) else Text(b) for b in blocked),
        ),
    )
