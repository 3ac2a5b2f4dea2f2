"""MIG layouts: what one card can hold, the fewest cards a demand takes, and the plan rule that
guaranteed MIG slices can be cut from the cluster's cards."""

import io
import json
import random
import re
from decimal import Decimal as D

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.models import QuotaRequest
from common.errors import ValidationFailed
from quotas.clusters import cluster_save
from quotas.mig import CARD_MODELS, card_layouts, mig_profile_of, plan_layout
from quotas.models import Allocation, AuditEvent, Cluster, Resource, TeamNamespace
from quotas.rules import (
    ERROR,
    RULE_MIG_LAYOUT,
    WARNING,
    AllocationFacts,
    ClusterFacts,
    PlanChange,
    check_change,
    check_plan,
)
from tests.support.requests import line_data

A100 = "A100 80GB"
ONE, THREE, FOUR = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-4g.40gb"


def _valid(model_name: str, card) -> bool:
    """A card's instances start where their profile may and share no memory slice, and the
    compute slices they take are the card's at most."""
    model = CARD_MODELS[model_name]
    used: set[int] = set()
    compute = 0
    for instance in card:
        profile = model.profile(instance.profile)
        covered = set(range(instance.start, instance.start + profile.memory))
        if instance.start not in profile.starts or covered & used:
            return False
        used |= covered
        compute += profile.compute
    return compute <= model.compute_slices and max(used, default=0) < model.memory_slices


def test_resource_names_name_their_profile():
    assert mig_profile_of("nvidia.com/mig-3g.40gb") == "3g.40gb"
    assert mig_profile_of("nvidia.com/gpu") is None
    assert mig_profile_of("nvidia.com/mig-") is None


def test_what_one_a100_can_hold_as_published():
    counts = {tuple(sorted(i.profile for i in layout)) for layout in card_layouts(A100)}
    # NVIDIA's examples: seven 1g, 4g + 3g, two 3g, 3g + 2g + 1g + 1g, one 7g.
    assert ("1g.10gb",) * 7 in counts
    assert ("3g.40gb", "4g.40gb") in counts
    assert ("3g.40gb", "3g.40gb") in counts
    assert ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb") in counts
    assert ("7g.80gb",) in counts
    # Never: two 4g, a 4g beside anything of four memory slices but a 3g, a 7g with anything.
    assert not any(c.count("4g.40gb") > 1 for c in counts)
    assert not any("7g.80gb" in c and len(c) > 1 for c in counts)
    assert all(_valid(A100, layout) for layout in card_layouts(A100))
    # An A30 (four slices): four 1g at most, one 4g alone.
    a30 = {tuple(sorted(i.profile for i in layout)) for layout in card_layouts("A30 24GB")}
    assert ("1g.6gb",) * 4 in a30 and ("4g.24gb",) in a30
    assert ("1g.6gb", "1g.6gb", "2g.12gb") in a30


def test_the_source_documents_examples_cannot_be_cut_from_one_a100():
    # "three 4g.40gb instances" on one A100: a 4g only starts at slice 0, one per card.
    three = plan_layout(A100, 1, {"4g.40gb": 3})
    assert not three.fits and three.cards_needed == 3
    # "one 2g.20gb plus one 7g.79gb": there is no 7g.79gb; a 7g.80gb takes the whole card.
    typo = plan_layout(A100, 1, {"2g.20gb": 1, "7g.79gb": 1})
    assert not typo.fits and typo.unknown == ("7g.79gb",)
    whole = plan_layout(A100, 1, {"2g.20gb": 1, "7g.80gb": 1})
    assert not whole.fits and whole.cards_needed == 2
    assert plan_layout(A100, 2, {"2g.20gb": 1, "7g.80gb": 1}).fits


def test_the_demo_mig_cluster_is_cut_on_its_four_cards_and_no_fewer():
    plan = plan_layout(A100, 4, {"1g.10gb": 14, "3g.40gb": 4})
    assert plan.fits and plan.cards_needed == 4
    assert all(_valid(A100, card) for card in plan.cards)
    assert sum(sum(card.values()) for card in plan.per_card()) == 18
    assert not plan_layout(A100, 3, {"1g.10gb": 14, "3g.40gb": 4}).fits
    # 3g + four 1g fit one card (compute 3 + 4 = 7): 16 1g and 4 3g on 4 cards, not 17.
    assert plan_layout(A100, 4, {"1g.10gb": 16, "3g.40gb": 4}).fits
    over = plan_layout(A100, 4, {"1g.10gb": 17, "3g.40gb": 4})
    assert not over.fits and over.cards_needed == 5


def test_a_layout_holds_the_demand_exactly_on_valid_cards():
    rng = random.Random(7)
    profiles = [p.name for p in CARD_MODELS[A100].profiles]
    for _ in range(200):
        demand = {p: rng.randint(0, 9) for p in rng.sample(profiles, rng.randint(1, 4))}
        cards = rng.randint(1, 16)
        plan = plan_layout(A100, cards, demand)
        wanted = {p: n for p, n in demand.items() if n}
        if plan.fits:
            got: dict[str, int] = {}
            for card in plan.cards:
                assert _valid(A100, card)
                for instance in card:
                    got[instance.profile] = got.get(instance.profile, 0) + 1
            assert got == wanted and len(plan.cards) <= cards
        else:
            assert plan.cards_needed is None or plan.cards_needed > cards
            assert plan.at_least > 0


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"]),
        st.integers(min_value=0, max_value=3),
        min_size=1,
    )
)
def test_the_fewest_cards_are_found(demand):
    # Exhaustively: the least k for which some k maximal layouts cover the demand.
    plan = plan_layout(A100, 12, demand)
    wanted = {p: n for p, n in demand.items() if n}
    if not wanted:
        assert plan.fits and plan.cards == ()
        return
    layouts = [
        {p: sum(1 for i in layout if i.profile == p) for p in wanted}
        for layout in card_layouts(A100)
    ]
    reachable = {tuple(0 for _ in wanted)}
    least = None
    for k in range(1, 13):
        reachable = {
            tuple(min(c + v[p], wanted[p]) for c, p in zip(r, wanted, strict=True))
            for r in reachable
            for v in layouts
        }
        if tuple(wanted.values()) in reachable:
            least = k
            break
    assert plan.fits and plan.cards_needed == least


def _mig_cluster(cards: int = 1) -> ClusterFacts:
    return ClusterFacts(
        name="mig",
        capacities={ONE: D(7), THREE: D(2), FOUR: D(1)},
        max_cap_share=D(1),
        whole_resources=frozenset({ONE, THREE, FOUR}),
        gpu_cards={A100: cards},
        mig_resources={ONE: (A100, "1g.10gb"), THREE: (A100, "3g.40gb"), FOUR: (A100, "4g.40gb")},
    )


def _alloc(namespace: str, resource: str, guarantee: int) -> AllocationFacts:
    return AllocationFacts(
        cluster="mig", namespace=namespace, resource=resource, guarantee=D(guarantee), cap=D(7)
    )


def _change(namespace, resource, guarantee, current=None) -> PlanChange:
    return PlanChange(
        cluster="mig",
        namespace=namespace,
        resource=resource,
        guarantee=D(guarantee),
        cap=D(7),
        current=current,
    )


def test_a_change_whose_guaranteed_slices_cannot_be_cut_is_refused_naming_the_cards():
    cluster = _mig_cluster(cards=1)
    plan = [_alloc("a", FOUR, 1)]
    # Each capacity holds alone (two 3g, one 4g), but not together on one card.
    findings = check_change(cluster=cluster, allocations=plan, changes=[_change("b", THREE, 2)])
    layout = [f for f in findings if f.rule == RULE_MIG_LAYOUT]
    assert [f.level for f in layout] == [ERROR]
    assert "1 A100 80GB cards" in layout[0].message and "they take 2 cards" in layout[0].message
    assert layout[0].resource == THREE and layout[0].namespace == ""
    # One 3g beside the 4g fits: no finding.
    ok = check_change(cluster=cluster, allocations=plan, changes=[_change("b", THREE, 1)])
    assert not [f for f in ok if f.rule == RULE_MIG_LAYOUT]


def test_a_change_that_raises_no_guarantee_of_an_uncuttable_plan_is_only_warned():
    cluster = _mig_cluster(cards=1)
    plan = [_alloc("a", FOUR, 1), _alloc("b", THREE, 2), _alloc("c", ONE, 1)]
    lower = check_change(
        cluster=cluster, allocations=plan, changes=[_change("c", ONE, 0, current=plan[2])]
    )
    assert [f.level for f in lower if f.rule == RULE_MIG_LAYOUT] == [WARNING]
    assert [
        f.level for f in check_plan(cluster=cluster, allocations=plan) if f.rule == RULE_MIG_LAYOUT
    ] == [ERROR]


def test_no_cards_known_no_layout_checked():
    cluster = ClusterFacts(
        name="mig", capacities={THREE: D(8)}, max_cap_share=D(1), whole_resources=frozenset({THREE})
    )
    findings = check_change(cluster=cluster, allocations=[], changes=[_change("b", THREE, 8)])
    assert not [f for f in findings if f.rule == RULE_MIG_LAYOUT]


@pytest.mark.parametrize("model", sorted(CARD_MODELS))
def test_every_model_cuts_its_own_profiles_on_one_card(model):
    for profile in CARD_MODELS[model].profiles:
        most = max(
            sum(1 for i in layout if i.profile == profile.name) for layout in card_layouts(model)
        )
        assert plan_layout(model, 1, {profile.name: most}).fits
        assert not plan_layout(model, 1, {profile.name: most + 1}).fits


# --------------------------------------------------------------------------------------------
# In the portal: the cluster's cards, the pages, the request form's impact


@pytest.fixture
def demo(db):
    call_command("seed_demo", stdout=io.StringIO(), stderr=io.StringIO())
    return Cluster.objects.get(name="demo-mig")


def test_cards_are_checked_naming_the_field_and_their_change_is_audited(demo):
    admin = User.objects.get(username="admin")
    demo.gpu_cards = {"A100": 4}
    with pytest.raises(ValidationFailed) as refused:
        cluster_save(cluster=demo, acting_user=admin)
    assert "gpu_cards" in str(refused.value.extra or refused.value.message) or "A100" in str(
        refused.value.message
    )
    for bad in ({"A100 80GB": 0}, {"A100 80GB": "4"}, {"A100 80GB": True}, ["A100 80GB"]):
        demo.gpu_cards = bad
        with pytest.raises(ValidationFailed):
            cluster_save(cluster=demo, acting_user=admin)
    demo.refresh_from_db()
    assert demo.gpu_cards == {A100: 4}  # nothing was lost
    demo.gpu_cards = {A100: 6}
    cluster_save(cluster=demo, acting_user=admin)
    event = AuditEvent.objects.filter(action="cluster.changed").latest("seq")
    assert event.before == {"name": "demo-mig", "gpu_cards": {A100: 4}}
    assert event.after == {"name": "demo-mig", "gpu_cards": {A100: 6}}


def test_the_cluster_page_shows_how_the_cards_are_cut(client, demo):
    client.force_login(User.objects.get(username="lead-a"))
    page = client.get("/clusters/demo-mig/").content.decode()
    block = re.search(r'data-testid="mig-layout-demo-mig">(.*?)</div>', page, re.S).group(1)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", block))
    assert "4 A100 80GB cards" in text and "Guaranteed: 6 × 1g.10gb, 1 × 3g.40gb" in text
    cards = re.search(r'data-testid="mig-cards">(.*?)</ol>', block, re.S).group(1)
    assert re.findall(r"card \d", cards) == ["card 1", "card 2"]
    assert sum(int(n) for n in re.findall(r"(\d+) ×", cards)) == 7
    assert "<code>1g.10gb</code>" in cards  # profile names are code, in every language
    assert "cards left uncut" in text
    # The demo cluster has no MIG cards: no layout there.
    assert "mig-layout" not in client.get("/clusters/demo/").content.decode()


def test_the_form_shows_the_layout_after_the_request_and_refuses_what_cannot_be_cut(client, demo):
    ns = TeamNamespace.objects.get(name="team-a-inference")
    client.force_login(User.objects.get(username="lead-a"))
    form = line_data(ns, Resource.objects.get(name=THREE), 2, 2, total=1)
    answer = client.post("/requests/validate/", form).json()
    impact = answer["impact_html"]
    assert 'data-testid="impact-mig-demo-mig"' in impact
    assert "after this request: 6 × 1g.10gb, 2 × 3g.40gb" in re.sub(r"<[^>]+>", "", impact)
    assert "The mix changes" in impact and 'data-testid="mig-cards"' in impact
    # Four 3g beside 17 1g: no four cards hold them (a card holds a 3g and four 1g at most),
    # though each capacity (raised here, with the share rule out of the way) would.
    demo.capacities.filter(resource__name=ONE).update(capacity=D(28))
    demo.capacities.filter(resource__name=THREE).update(capacity=D(8))
    Cluster.objects.filter(pk=demo.pk).update(max_cap_share=D(1))
    team_b = TeamNamespace.objects.get(name="team-b-dev")
    ones = Allocation.objects.filter(resource__name=ONE, team_namespace__cluster=demo)
    others = sum(a.guarantee for a in ones.exclude(team_namespace=team_b))
    ones.filter(team_namespace=team_b).update(guarantee=D(17) - others, cap=D(17))
    form = line_data(ns, Resource.objects.get(name=THREE), 4, 4, total=1)
    answer = client.post("/requests/validate/", form).json()
    text = re.sub(r"<[^>]+>", "", answer["impact_html"])
    assert "cannot be cut from its 4 A100 80GB cards: they take 5 cards" in text
    assert "A submit would be refused" in text
    # Said where the line is (or above the form), not only in the panel; nothing saved.
    assert answer["ok"] is False
    assert "they take 5 cards" in json.dumps([answer["fields"], answer["messages"]])
    assert not QuotaRequest.objects.exists()
