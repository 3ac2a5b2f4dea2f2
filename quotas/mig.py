"""MIG layouts that can exist: which GPU instances can be cut from a cluster's cards, and how.

A MIG-capable card is cut into GPU instances of fixed profiles, and a profile can only start at
certain memory slices of the card (``nvidia-smi mig -lgipp`` lists the placements). The figures
below are NVIDIA's published geometry of each model (the MIG user guide's supported profiles):

- A100 and H100/H200 cards have 8 memory slices and 7 compute slices. A 1g profile with one
  memory slice may start at slices 0-6 (so at most seven per card), a 1g profile with two memory
  slices at 0, 2, 4 or 6, a 2g at 0, 2 or 4, a 3g (four memory slices) at 0 or 4, a 4g at 0
  and a 7g takes the whole card.
- An A30 has 4 memory slices and 4 compute slices: 1g at 0-3, 2g at 0 or 2, 4g the whole card.

Profile names follow the card's memory (A100 80GB: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb,
7g.80gb), so a name means one thing on one model only; the Kubernetes resource of a profile is
``nvidia.com/mig-<profile>`` (the device plugin's mixed strategy). Media-extension profiles
(``+me``) are not offered here.

Pure functions (no ORM): :func:`card_layouts` lists what one card can hold, :func:`plan_layout`
finds the fewest cards that hold a demand (a count per profile) and what each card is cut into,
or says why none can.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class Profile:
    name: str  # "3g.40gb"
    compute: int  # compute slices
    memory: int  # memory slices it covers
    starts: tuple[int, ...]  # memory slices it may start at


@dataclass(frozen=True)
class CardModel:
    name: str  # "A100 80GB"
    memory_slices: int
    compute_slices: int
    profiles: tuple[Profile, ...]

    def profile(self, name: str) -> Profile | None:
        return next((p for p in self.profiles if p.name == name), None)


def _eight_slice_model(name: str, gb: tuple[str, str, str, str, str, str]) -> CardModel:
    one, one_double, two, three, four, seven = gb
    return CardModel(
        name=name,
        memory_slices=8,
        compute_slices=7,
        profiles=(
            Profile(f"1g.{one}gb", 1, 1, (0, 1, 2, 3, 4, 5, 6)),
            Profile(f"1g.{one_double}gb", 1, 2, (0, 2, 4, 6)),
            Profile(f"2g.{two}gb", 2, 2, (0, 2, 4)),
            Profile(f"3g.{three}gb", 3, 4, (0, 4)),
            Profile(f"4g.{four}gb", 4, 4, (0,)),
            Profile(f"7g.{seven}gb", 7, 8, (0,)),
        ),
    )


CARD_MODELS: dict[str, CardModel] = {
    model.name: model
    for model in (
        _eight_slice_model("A100 40GB", ("5", "10", "10", "20", "20", "40")),
        _eight_slice_model("A100 80GB", ("10", "20", "20", "40", "40", "80")),
        _eight_slice_model("H100 80GB", ("10", "20", "20", "40", "40", "80")),
        _eight_slice_model("H100 94GB", ("12", "24", "24", "47", "47", "94")),
        _eight_slice_model("H200 141GB", ("18", "35", "35", "71", "71", "141")),
        CardModel(
            name="A30 24GB",
            memory_slices=4,
            compute_slices=4,
            profiles=(
                Profile("1g.6gb", 1, 1, (0, 1, 2, 3)),
                Profile("2g.12gb", 2, 2, (0, 2)),
                Profile("4g.24gb", 4, 4, (0,)),
            ),
        ),
    )
}


def mig_profile_of(resource: str) -> str | None:
    """The MIG profile a Kubernetes resource name asks for ("nvidia.com/mig-3g.40gb" ->
    "3g.40gb"), or None for any other resource."""
    if resource.startswith(MIG_RESOURCE_PREFIX):
        return resource[len(MIG_RESOURCE_PREFIX) :] or None
    return None


@dataclass(frozen=True)
class Instance:
    profile: str
    start: int  # first memory slice


@cache
def card_layouts(model_name: str) -> tuple[tuple[Instance, ...], ...]:
    """Every way one card of the model can be cut that no further instance fits into (each a
    tuple of instances by start slice). Fewer than a hundred per model."""
    model = CARD_MODELS[model_name]
    found: set[tuple[Instance, ...]] = set()

    def fits(profile: Profile, start: int, used: frozenset[int], compute: int) -> bool:
        covered = set(range(start, start + profile.memory))
        return not covered & used and compute + profile.compute <= model.compute_slices

    def grow(placed: tuple[Instance, ...], used: frozenset[int], compute: int, after: int):
        grown = False
        for index, profile in enumerate(model.profiles):
            for start in profile.starts:
                # Instances are added in (start, profile) order, so each layout is made once.
                if (start, index) < divmod(after, len(model.profiles)) or not fits(
                    profile, start, used, compute
                ):
                    continue
                grown = True
                grow(
                    (*placed, Instance(profile.name, start)),
                    used | set(range(start, start + profile.memory)),
                    compute + profile.compute,
                    start * len(model.profiles) + index,
                )
        # Maximal only if nothing at all fits any more (not only after ``after``).
        if (
            not grown
            and placed
            and not any(fits(p, s, used, compute) for p in model.profiles for s in p.starts)
        ):
            found.add(tuple(sorted(placed, key=lambda i: (i.start, i.profile))))

    grow((), frozenset(), 0, -1)
    return tuple(sorted(found, key=lambda layout: [(i.start, i.profile) for i in layout]))


@cache
def _count_vectors(
    model_name: str, profiles: tuple[str, ...]
) -> tuple[tuple[tuple[int, ...], tuple[Instance, ...]], ...]:
    """Per distinct count vector (over ``profiles``) one card can hold at most, a layout giving
    it; vectors another one covers are dropped (a card cut for more serves less too)."""
    vectors: dict[tuple[int, ...], tuple[Instance, ...]] = {}
    for layout in card_layouts(model_name):
        vector = tuple(sum(1 for i in layout if i.profile == p) for p in profiles)
        vectors.setdefault(vector, layout)
    kept = [
        (v, layout)
        for v, layout in vectors.items()
        if any(v)
        and not any(w != v and all(a >= b for a, b in zip(w, v, strict=True)) for w in vectors)
    ]
    return tuple(sorted(kept, reverse=True))


@dataclass(frozen=True)
class LayoutPlan:
    """How a demand is cut from a model's cards.

    ``fits``: the demand can be cut from ``cards_available`` cards; ``cards`` is then a layout
    (one tuple of instances per card used). ``cards_needed``: the cards that layout takes, or,
    when it does not fit, the fewest that would hold it (None when not known: the search gave
    up, ``proven`` False, and only ``at_least`` is known). ``unknown``: profiles the model does
    not have."""

    model: str
    cards_available: int
    demand: dict[str, int]
    cards: tuple[tuple[Instance, ...], ...] = ()
    cards_needed: int | None = 0
    at_least: int = 0
    unknown: tuple[str, ...] = ()
    proven: bool = True

    @property
    def fits(self) -> bool:
        return (
            not self.unknown
            and self.cards_needed is not None
            and self.cards_needed <= self.cards_available
        )

    def per_card(self) -> list[dict[str, int]]:
        """Each card's instances as a count per profile (in the demand's profile order)."""
        return [
            {p: n for p in self.demand if (n := sum(1 for i in card if i.profile == p))}
            for card in self.cards
        ]


# The exact search keeps at most this many partial covers per card added; past it, it gives
# up rather than take long (a demand of hundreds of instances of several profiles).
SEARCH_STATES = 20_000


def plan_layout(model_name: str, cards_available: int, demand: Mapping[str, int]) -> LayoutPlan:
    """Whether ``demand`` (instances per profile) can be cut from ``cards_available`` cards of
    the model, with a layout when it can and the fewest cards it takes when it cannot.

    A greedy cut (each card cut for the most memory slices of what is still wanted) gives a
    layout of G cards; lower bounds give L (the memory and compute slices the demand needs,
    and per profile the most instances one card holds). G = L: the greedy cut is the fewest.
    L > cards: it cannot fit. Else an exact search finds the fewest (a layout that leaves
    more cards uncut), or whether it fits at all:
    breadth-first over the covers reachable with one card more (each capped at the demand,
    dominated ones dropped), so the first card count whose covers reach the demand is the
    least; past SEARCH_STATES covers it gives up (the greedy cut stands if it fits, else
    ``proven`` False)."""
    model = CARD_MODELS[model_name]
    wanted = {p: int(n) for p, n in demand.items() if int(n) > 0}
    unknown = tuple(sorted(p for p in wanted if model.profile(p) is None))
    if unknown:
        return LayoutPlan(model_name, cards_available, wanted, cards_needed=None, unknown=unknown)
    if not wanted:
        return LayoutPlan(model_name, cards_available, {})
    profiles = tuple(sorted(wanted, key=lambda p: (-model.profile(p).memory, p)))
    target = tuple(wanted[p] for p in profiles)
    vectors = _count_vectors(model_name, profiles)
    greedy = _greedy(model, profiles, target, vectors)
    least = _lower_bound(model, profiles, target, vectors)

    def plan(layouts: tuple, needed: int | None, proven: bool = True) -> LayoutPlan:
        fits = needed is not None and needed <= cards_available
        return LayoutPlan(
            model_name,
            cards_available,
            wanted,
            _trimmed(layouts, wanted) if fits else (),
            cards_needed=needed,
            at_least=least,
            proven=proven,
        )

    if len(greedy) == least:
        return plan(greedy, len(greedy))
    if least > cards_available:
        # Cannot fit: at least ``least`` cards, at most the greedy cut's.
        return plan((), None)
    found = _search(profiles, target, vectors, upto=len(greedy) - 1)
    if found is None:  # the greedy cut is the fewest
        return plan(greedy, len(greedy))
    if found is False:  # gave up: the greedy cut stands if it fits
        if len(greedy) <= cards_available:
            return plan(greedy, len(greedy))
        return plan((), None, proven=False)
    return plan(found, len(found))


def _greedy(model: CardModel, profiles, target, vectors) -> tuple[tuple[Instance, ...], ...]:
    """Card by card, the layout that covers the most memory slices of what is still wanted."""
    size = [model.profile(p).memory for p in profiles]
    left = list(target)
    cards = []
    while any(left):
        worth = [
            sum(min(v, n) * m for v, n, m in zip(vector, left, size, strict=True))
            for vector, _ in vectors
        ]
        best = max(range(len(vectors)), key=worth.__getitem__)
        if worth[best] == 0:  # pragma: no cover - every profile has a layout
            raise ValueError(f"no layout of {model.name} holds {profiles}")
        vector, layout = vectors[best]
        cards.append(layout)
        left = [max(n - v, 0) for n, v in zip(left, vector, strict=True)]
    return tuple(cards)


def _lower_bound(model: CardModel, profiles, target, vectors) -> int:
    """Cards the demand needs at least: its memory slices, its compute slices, and each
    profile's count over the most of it one card holds."""
    memory = sum(n * model.profile(p).memory for p, n in zip(profiles, target, strict=True))
    compute = sum(n * model.profile(p).compute for p, n in zip(profiles, target, strict=True))
    bounds = [-(-memory // model.memory_slices), -(-compute // model.compute_slices)]
    for index, n in enumerate(target):
        most = max(vector[index] for vector, _ in vectors)
        bounds.append(-(-n // most))
    return max(bounds)


def _search(profiles, target, vectors, *, upto: int):
    """The fewest cards' layouts (at most ``upto`` cards) covering ``target``; None when more
    are needed, False when the search gave up."""
    frontier: dict[tuple[int, ...], tuple] = {tuple(0 for _ in profiles): ()}
    for _cards in range(1, upto + 1):
        grown_covers: dict[tuple[int, ...], tuple] = {}
        for covered, path in frontier.items():
            for vector, layout in vectors:
                grown = tuple(
                    min(c + v, t) for c, v, t in zip(covered, vector, target, strict=True)
                )
                if grown not in grown_covers:
                    grown_covers[grown] = (*path, layout)
        if target in grown_covers:
            return grown_covers[target]
        if len(grown_covers) > SEARCH_STATES:
            return False
        # Dropping dominated covers costs a comparison per pair: worth it while they are few.
        frontier = _undominated(grown_covers) if len(grown_covers) <= 1_000 else grown_covers
    return None


def _undominated(covers: dict[tuple[int, ...], tuple]) -> dict[tuple[int, ...], tuple]:
    ordered = sorted(covers, key=lambda v: -sum(v))
    kept: list[tuple[int, ...]] = []
    for v in ordered:
        if not any(all(a >= b for a, b in zip(k, v, strict=True)) for k in kept):
            kept.append(v)
    return {v: covers[v] for v in kept}


def _trimmed(
    layouts: tuple[tuple[Instance, ...], ...], wanted: Mapping[str, int]
) -> tuple[tuple[Instance, ...], ...]:
    """The cards' layouts cut to the demand: instances beyond what is wanted are left uncut
    (a later request may want them otherwise), and instances of profiles nobody wants too."""
    left = dict(wanted)
    out = []
    for layout in layouts:
        card = []
        for instance in layout:
            if left.get(instance.profile, 0) > 0:
                left[instance.profile] -= 1
                card.append(instance)
        out.append(tuple(card))
    return tuple(out)
