"""Row locks of usage's tables, in the order portal.locks.LOCK_ORDER states."""

from quotas.locks import SELF
from usage.models import Suggestion


def _ids(query) -> list[int]:
    return list(query.select_for_update(of=SELF).order_by("id").values_list("id", flat=True))


def lock_suggestion(suggestion_id: int) -> None:
    """A request made from a suggestion: one at a time, so two clicks make one request."""
    _ids(Suggestion.objects.filter(pk=suggestion_id))


def lock_suggestions_deleted_with(*, cluster_id: int | None, team_namespace_id: int | None) -> None:
    """The suggestions a cluster's or a team namespace's deletion deletes with it."""
    if cluster_id is not None:
        _ids(Suggestion.objects.filter(cluster_id=cluster_id))
    if team_namespace_id is not None:
        _ids(Suggestion.objects.filter(team_namespace_id=team_namespace_id))
