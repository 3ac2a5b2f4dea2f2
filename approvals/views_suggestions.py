"""The button of the suggestions page: POST /requests/from-suggestion/<id>/ turns a suggestion
into a draft or a submitted request, then shows that request."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from approvals.suggestions import request_from_suggestion
from portal.errors import ApplicationError, PermissionDenied
from quotas.usage.suggestion_selectors import suggestions_visible_to


@login_required
@require_POST
def suggestion_request(request: HttpRequest, pk: int) -> HttpResponse:
    suggestion = suggestions_visible_to(request.user).filter(pk=pk).first()
    if suggestion is None:
        raise Http404("no such suggestion")
    submit = request.POST.get("submit") == "1"
    try:
        qr = request_from_suggestion(suggestion=suggestion, acting_user=request.user, submit=submit)
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        # Submission refused (e.g. a rule the plan breaks now): the draft is kept to be fixed.
        messages.error(request, f"not submitted: {exc.message}")
        draft = exc.extra.get("request")
        if draft:
            return redirect("requests-detail", pk=draft)
        return redirect("suggestions-list")
    verb = "submitted" if submit else "saved as a draft"
    messages.success(request, f"Request #{qr.pk} {verb} from the suggestion.")
    return redirect("requests-detail", pk=qr.pk)
