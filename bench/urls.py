"""The portal's URLs and two trivial views on the same stack, the yardsticks of the page
benchmarks: ``bench/trivial/`` (a logged-in page: sessions, authentication and every
middleware, then a tiny response) and ``bench/trivial-api/`` (the same through the REST API's
token authentication, throttles and renderer)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.urls import urlpatterns as portal_urlpatterns


@login_required
def trivial(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"ok {request.user.pk}", content_type="text/plain")


class TrivialApi(APIView):
    def get(self, request):
        return Response({"user": request.user.pk})


urlpatterns = [
    path("bench/trivial/", trivial, name="bench-trivial"),
    path("bench/trivial-api/", TrivialApi.as_view(), name="bench-trivial-api"),
    *portal_urlpatterns,
]
