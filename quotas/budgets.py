"""Budgets across clusters: GPUs counted alike on every cluster, a team's ceiling over all of
them, and what GPU-hours cost where clusters have a price.

Pure functions (no ORM). A GPU is counted as one; a MIG slice as its share of the card it is
cut from, the larger of its compute and its memory share (a 3g.40gb takes four of an A100's
eight memory slices: half a card, as only two fit; a 1g.10gb one of seven compute slices).
HAMi's vGPU memory and cores are parts of cards already counted by their ``nvidia.com/gpu``,
and CPU and memory are not GPUs: neither counts. Totals are exact fractions, so seven 1g
slices are one card and a ceiling of 1 holds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from django.utils.translation import gettext_noop

from common.amounts import format_amount, rounded
from quotas.mig import CARD_MODELS, MIG_RESOURCE_PREFIX, CardModel
from quotas.rules import ERROR, RULE_TEAM_GPU_CEILING, WARNING, Finding
from quotas.texts import Text

# An average month: 365 days × 24 hours / 12.
HOURS_PER_MONTH = 730
GPU_KIND = "gpu"
MIG_KIND = "mig"


def _card_share(model: CardModel, profile_name: str) -> Fraction | None:
    profile = model.profile(profile_name)
    if profile is None:
        return None
    return max(
        Fraction(profile.compute, model.compute_slices),
        Fraction(profile.memory, model.memory_slices),
    )


def gpus_per_unit(*, kind: str, name: str, gpu_model: str = "") -> Fraction | None:
    """What one unit of a resource counts as in GPUs; None: it is not counted (not a GPU, or a
    MIG profile no known card has)."""
    if kind == GPU_KIND:
        return Fraction(1)
    if kind != MIG_KIND or not name.startswith(MIG_RESOURCE_PREFIX):
        return None
    profile = name[len(MIG_RESOURCE_PREFIX) :]
    if gpu_model in CARD_MODELS:
        share = _card_share(CARD_MODELS[gpu_model], profile)
        if share is not None:
            return share
    # A profile's name follows the card's memory, so models that share it share its geometry.
    shares = {_card_share(model, profile) for model in CARD_MODELS.values()} - {None}
    return shares.pop() if len(shares) == 1 else None


def gpu_figure(value: Fraction | Decimal | int) -> Decimal:
    """A count of GPUs as shown: two decimals at most, half up."""
    return rounded(value, "0.01").normalize()


def over_ceiling_figures(after: Fraction, ceiling: Decimal) -> dict[str, str]:
    """A total over a ceiling as its messages write it: the total, the ceiling, how much over."""
    return {
        "total": format_amount(gpu_figure(after)),
        "ceiling": format_amount(gpu_figure(ceiling)),
        "over": format_amount(gpu_figure(after - Fraction(ceiling))),
    }


# --- the ceiling rule ------------------------------------------------------------------------


@dataclass(frozen=True)
class CeilingFacts:
    """A team with a ceiling, and what the caps counted against it add up to now: those of its
    own namespaces and of the teams under it, on every cluster, plus what approved temporary
    grants will add."""

    team: str  # slug
    ceiling: Decimal
    capped: Fraction  # GPUs
    with_teams_under: bool = False


@dataclass(frozen=True)
class CeilingChange:
    """A changed cap, with the teams whose ceilings count it (its team and the teams above)."""

    cluster: str
    namespace: str
    resource: str
    teams: frozenset[str]
    gpus_per_unit: Fraction | None
    cap_before: Decimal
    cap_after: Decimal

    @property
    def gpus_added(self) -> Fraction:
        if self.gpus_per_unit is None:
            return Fraction(0)
        return (Fraction(self.cap_after) - Fraction(self.cap_before)) * self.gpus_per_unit


def check_ceilings(
    *, ceilings: Iterable[CeilingFacts], changes: Sequence[CeilingChange]
) -> list[Finding]:
    """Findings of the ceilings the changes touch: an error on every
    change that raises a total above its team's ceiling; a warning when a total is above its
    ceiling already and the changes do not raise it."""
    findings = []
    for facts in ceilings:
        counted = [c for c in changes if facts.team in c.teams and c.gpus_per_unit is not None]
        if not counted:
            continue
        after = facts.capped + sum((c.gpus_added for c in counted), Fraction(0))
        if after <= Fraction(facts.ceiling):
            continue
        raising = [c for c in counted if c.gpus_added > 0]
        params = {"team": facts.team, **over_ceiling_figures(after, facts.ceiling)}
        if after > facts.capped and raising:
            msgid = (
                gettext_noop(
                    "the caps of team %(team)s and the teams under it over all clusters would "
                    "add up to %(total)s GPUs, above its ceiling of %(ceiling)s (over by "
                    "%(over)s): lower a cap elsewhere, or ask a platform admin for a higher "
                    "ceiling"
                )
                if facts.with_teams_under
                else gettext_noop(
                    "the caps of team %(team)s over all clusters would add up to %(total)s "
                    "GPUs, above its ceiling of %(ceiling)s (over by %(over)s): lower a cap "
                    "elsewhere, or ask a platform admin for a higher ceiling"
                )
            )
            level, on = ERROR, raising
        else:
            msgid = gettext_noop(
                "the caps of team %(team)s over all clusters add up to %(total)s GPUs, above "
                "its ceiling of %(ceiling)s (over by %(over)s); this change does not raise them"
            )
            level, on = WARNING, counted[:1]
        text = Text.of(msgid, **params)
        findings += [
            Finding.of(
                level, RULE_TEAM_GPU_CEILING, "cap", text, c.cluster, c.namespace, c.resource
            )
            for c in on
        ]
    return findings


def team_chains(parents: Mapping[str, str | None]) -> dict[str, frozenset[str]]:
    """Per team slug, the team and every team above it (a cycle ends the walk)."""
    chains = {}
    for team in parents:
        chain, node = [], team
        while node is not None and node not in chain:
            chain.append(node)
            node = parents.get(node)
        chains[team] = frozenset(chain)
    return chains
