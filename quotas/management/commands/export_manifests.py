"""Print every object the portal wants on a cluster as multi-document YAML.

``python manage.py export_manifests [--cluster NAME]``: Namespaces first (the apply order of
``quotas.kube.render.render_cluster``), one ``---`` separated document per object, each
cluster's documents after a ``# cluster: NAME`` comment. Read-only: nothing is written anywhere
but stdout, so the output can be reviewed or fed to ``kubectl apply -f -``.
"""

import yaml
from django.core.management.base import BaseCommand, CommandError

from quotas.kube.plan import cluster_plan
from quotas.kube.render import render_cluster
from quotas.models import Cluster

_TOP_LEVEL_ORDER = ("apiVersion", "kind", "metadata", "spec", "data")


def _ordered(obj: dict) -> dict:
    """apiVersion, kind, metadata, spec/data first; any other top-level field after them."""
    head = {key: obj[key] for key in _TOP_LEVEL_ORDER if key in obj}
    return head | {key: value for key, value in obj.items() if key not in head}


def manifests_yaml(objects: list[dict]) -> str:
    """``---`` separated YAML documents of ``objects``, in the given order."""
    return "".join(
        "---\n" + yaml.safe_dump(_ordered(obj), sort_keys=False, default_flow_style=False)
        for obj in objects
    )


class Command(BaseCommand):
    help = "Print the desired Kubernetes objects of one cluster (or all) as YAML documents."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="name of the cluster (default: every cluster)")

    def handle(self, *args, **options) -> None:
        name = options.get("cluster")
        if name:
            clusters = list(Cluster.objects.filter(name=name))
            if not clusters:
                raise CommandError(f"unknown cluster {name!r}")
        else:
            clusters = list(Cluster.objects.order_by("name"))
        for cluster in clusters:
            objects = render_cluster(cluster_plan(cluster))
            self.stdout.write(f"# cluster: {cluster.name}\n", ending="")
            self.stdout.write(manifests_yaml(objects), ending="")
