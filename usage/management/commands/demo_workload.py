"""``python manage.py demo_workload [--cluster demo] [--interval 60]``: the demo's running work
on its sandbox cluster, so that what teams use now moves as their history did a week before
(``usage/demo_history.py``); ``make run`` starts it beside the sandboxes. Runs until stopped;
``--once`` does one round."""

import logging
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from quotas.kube.client import KubeError, client_for_cluster
from quotas.models import Cluster
from usage.demo_history import demo_work_tick

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Keep the demo cluster's pods at what its namespaces held a week before."
    # Started by make run, whose summary says the checks' findings once.
    requires_system_checks = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", default="demo", help="cluster name (default: demo)")
        parser.add_argument("--interval", type=float, default=60.0, help="seconds between rounds")
        parser.add_argument("--once", action="store_true", help="one round, then stop")

    def handle(self, *args, **options) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"--cluster: no cluster named {options['cluster']!r}")
        if cluster.connection != "sandbox":
            raise CommandError(
                f"--cluster: {cluster.name} is not a sandbox; demo work only runs there"
            )
        while True:
            try:
                client = client_for_cluster(cluster, timeout=settings.KUBE_REQUEST_TIMEOUT)
                try:
                    held = demo_work_tick(cluster=cluster, client=client, now=timezone.now())
                finally:
                    client.close()
                if options["once"]:
                    for (namespace, resource), n in sorted(held.items()):
                        self.stdout.write(f"{namespace} {resource}: {n}")
            except KubeError as exc:  # the sandbox starting or stopping: the next round retries
                log.info("demo work on %s: %s", cluster.name, exc)
            except Exception:  # a demo helper: one bad round must not stop the demo with it
                if options["once"]:
                    raise
                log.warning(
                    "demo work on %s failed; next round in a minute", cluster.name, exc_info=True
                )
            if options["once"]:
                return
            time.sleep(options["interval"])
