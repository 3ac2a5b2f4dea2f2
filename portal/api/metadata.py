"""``OPTIONS`` of every API endpoint: what to send, not what comes back.

DRF's default describes a view's (read) serializer under ``actions.POST``, which for quota
requests lists the fields of the answer. Here ``actions`` lists, per method, the fields of the
serializer the view validates its body with (``view.request_serializers``), and the answer
points at the OpenAPI schema, which describes everything else.
"""

from django.urls import reverse
from rest_framework.metadata import SimpleMetadata


class ApiMetadata(SimpleMetadata):
    def determine_metadata(self, request, view) -> dict:
        metadata = super().determine_metadata(request, view)
        metadata.pop("actions", None)
        metadata["schema"] = request.build_absolute_uri(reverse("api-schema"))
        metadata["docs"] = request.build_absolute_uri(reverse("api-docs"))
        metadata["allowed_methods"] = [m for m in view.allowed_methods if m != "OPTIONS"]
        bodies = getattr(view, "request_serializers", None) or {}
        actions = {}
        for method, serializer_class in bodies.items():
            if method in view.allowed_methods and serializer_class is not None:
                actions[method] = self.get_serializer_info(serializer_class())
        if actions:
            metadata["actions"] = actions
        return metadata
