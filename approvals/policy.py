"""Who must decide a request: pure rules from the size of the change and the cluster policy."""

from dataclasses import dataclass
from decimal import Decimal

DEFAULT_AUTO_APPROVE_DECREASES = True
DEFAULT_AUTO_APPROVE_INCREASE_MAX = Decimal(1)
DEFAULT_TWO_ADMINS_ABOVE = Decimal(4)


@dataclass(frozen=True)
class PolicyFacts:
    auto_approve_decreases: bool = DEFAULT_AUTO_APPROVE_DECREASES
    auto_approve_increase_max: Decimal = DEFAULT_AUTO_APPROVE_INCREASE_MAX
    two_admins_above: Decimal = DEFAULT_TWO_ADMINS_ABOVE


@dataclass(frozen=True)
class LineDelta:
    cluster: str
    guarantee_before: Decimal
    guarantee_after: Decimal
    cap_before: Decimal
    cap_after: Decimal

    @property
    def increase(self) -> Decimal:
        """The larger of the guarantee and cap increases (0 for a decrease)."""
        return max(
            Decimal(0),
            self.guarantee_after - self.guarantee_before,
            self.cap_after - self.cap_before,
        )

    @property
    def is_decrease_only(self) -> bool:
        return self.guarantee_after <= self.guarantee_before and self.cap_after <= self.cap_before


@dataclass(frozen=True)
class PolicyDecision:
    auto_approve: bool
    approvals_needed: int
    reason: str


def decide_policy(
    lines: list[LineDelta], policies: dict[str, PolicyFacts], *, plan_has_errors: bool
) -> PolicyDecision:
    """Auto-approve what is safe, else one admin, or two above the threshold.

    A request touching several clusters gets the strictest of their policies. Nothing with a
    validation error is auto-approved (it is refused at submit anyway).
    """
    if not lines:
        return PolicyDecision(False, 1, "nothing to change")

    def policy(line: LineDelta) -> PolicyFacts:
        return policies.get(line.cluster, PolicyFacts())

    needs_two = [line for line in lines if line.increase > policy(line).two_admins_above]
    if needs_two:
        biggest = max(needs_two, key=lambda line: line.increase)
        return PolicyDecision(
            False,
            2,
            f"an increase of {biggest.increase.normalize():f} on {biggest.cluster} is above "
            f"{policy(biggest).two_admins_above.normalize():f}: two admins must approve",
        )
    if plan_has_errors:
        return PolicyDecision(False, 1, "the plan has errors")
    if all(line.is_decrease_only and policy(line).auto_approve_decreases for line in lines):
        return PolicyDecision(True, 0, "only decreases: approved automatically")
    small = all(
        (line.is_decrease_only and policy(line).auto_approve_decreases)
        or (
            policy(line).auto_approve_increase_max > 0
            and line.increase <= policy(line).auto_approve_increase_max
        )
        for line in lines
    )
    if small:
        return PolicyDecision(
            True, 0, "small increase within free capacity: approved automatically"
        )
    return PolicyDecision(False, 1, "one platform admin must approve")
