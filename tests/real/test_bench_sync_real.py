"""The sync benchmark on the real control plane runs end to end at a tiny size: both writers
put every object on the API server, the portal's re-sync finds nothing to change, and the
figures have their agreed shape (kubectl's time as baseline); times are not asserted."""

import json
import os
import subprocess
import sys

from bench.common import ROOT


def test_the_real_sync_benchmark_measures_the_portal_against_kubectl(control_plane, tmp_path):
    out = tmp_path / "sync-real.json"
    env = {**os.environ, "BENCH_QUICK": "1", "BENCH_FIGURES_OUT": str(out)}
    for name in ("DJANGO_SETTINGS_MODULE", "CELERY_BROKER_URL", "CACHE_URL"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.bench_sync_real", "--namespaces", "4"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    size = data["details"]["size"]
    assert size["problems"] == []
    # Per namespace a Namespace, a ResourceQuota and a Volcano queue, and the cluster's own.
    assert size["objects"] > 3 * 4
    assert size["kubectl_objects"] == size["objects"] - size["left_out_of_kubectl"] >= 3 * 4
    assert size["portal_first_sync"]["counts"] == {"created": size["objects"]}
    assert size["portal_unchanged_resync"]["counts"] == {"unchanged": size["objects"]}
    assert size["kubectl_first_apply"]["applied"] == size["kubectl_objects"]
    figures = {f["figure"].rsplit(": ", 1)[1]: f for f in data["figures"]}
    assert set(figures) == {"first sync", "unchanged re-sync"}
    for fig in figures.values():
        assert fig["unit"] == "s"
        assert fig["value"] > 0 and fig["baseline"] > 0
        assert fig["baseline_label"].startswith("kubectl apply --server-side")
