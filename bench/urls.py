"""The portal's URLs and two trivial views on the same stack, the yardsticks of the page
benchmarks: ``bench/trivial/`` (a logged-in page: sessions, authentication and every
middleware, then a tiny response) and ``bench/trivial-api/`` (the same through the REST API's
token authentication, throttles and renderer); and ``bench/floor/<n>/``, the trivial view
that first reads one row n times (one team by its key each time, as a page's smallest
queries do): what n queries alone cost a page."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.urls import urlpatterns as portal_urlpatterns
from quotas.models import Team


@login_required
def trivial(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"ok {request.user.pk}", content_type="text/plain")


@login_required
def floor(request: HttpRequest, queries: int) -> HttpResponse:
    found = [
        Team.objects.filter(pk=request.user.pk + k).values_list("id", flat=True).first()
        for k in range(queries)
    ]
    return HttpResponse(f"ok {len(found)}", content_type="text/plain")


class TrivialApi(APIView):
    def get(self, request):
        return Response({"user": request.user.pk})


urlpatterns = [
    path("bench/trivial/", trivial, name="bench-trivial"),
    path("bench/trivial-api/", TrivialApi.as_view(), name="bench-trivial-api"),
    path("bench/floor/<int:queries>/", floor, name="bench-floor"),
    *portal_urlpatterns,
]
