"""A MIG layout (quotas.mig.LayoutPlan) in the reader's words, as the pages show it."""

from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, ngettext

from quotas.mig import LayoutPlan


def instances_words(counts: dict[str, int]) -> SafeString:
    """ "4 × 1g.10gb, 1 × 3g.40gb", each profile name as code (the same in every language)."""
    shown = [(n, profile) for profile, n in counts.items() if n]
    if not shown:
        return format_html("{}", "\N{EN DASH}")
    return format_html_join(", ", "{} × <code>{}</code>", shown)


def layout_cells(plan: LayoutPlan) -> dict:
    """The plan, its demand and each card's instances in words, and the cards left uncut."""
    uncut = max(plan.cards_available - len(plan.cards), 0) if plan.fits else 0
    demand = instances_words(plan.demand)
    cards = [instances_words(card) for card in plan.per_card()]
    return {
        "plan": plan,
        "demand": demand,
        "cards": cards,
        "summary": _sentence(gettext("Guaranteed: %(demand)s."), demand=demand),
        "card_lines": [
            _sentence(gettext("card %(n)s: %(instances)s"), n=n, instances=card)
            for n, card in enumerate(cards, start=1)
        ],
        "uncut": ngettext("%(num)d card left uncut", "%(num)d cards left uncut", uncut)
        % {"num": uncut}
        if uncut
        else "",
    }


def _sentence(text: str, **values) -> SafeString:
    """A translated sentence with values that may be HTML (the profile names as code): the
    sentence escaped, then filled with the values escaped unless they are safe already."""
    return mark_safe(  # noqa: S308 - every part escaped above
        conditional_escape(text) % {k: conditional_escape(v) for k, v in values.items()}
    )
