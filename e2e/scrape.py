"""Scrapes `nodejob controller`'s endpoints at BASE (http://HOST:PORT) and prints, as one JSON
object: the status of /healthz and /readyz, and every sample of /metrics as the Prometheus
project's own parsers read it (prometheus_client), in both formats the endpoint serves: the
Prometheus text format (no Accept) and OpenMetrics (Accept: application/openmetrics-text).
A parser that is not ours: a line it cannot read fails the scrape. Used by
nodejob-e2e/tests/controller.rs, with the python e2e/run prepares.

    python scrape.py http://127.0.0.1:8080 [PROBES_BASE]
"""

import json
import sys
import urllib.error
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus


def get(url, accept=None):
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def samples(families):
    return [
        {"name": s.name, "labels": s.labels, "value": s.value, "type": f.type}
        for f in families
        for s in f.samples
    ]


def main():
    base = sys.argv[1].rstrip("/")
    probes = (sys.argv[2] if len(sys.argv) > 2 else base).rstrip("/")
    status, kind, text = get(base + "/metrics")
    if status != 200:
        sys.exit(f"GET {base}/metrics: {status}: {text}")
    om_status, om_kind, om_text = get(
        base + "/metrics", "application/openmetrics-text; version=1.0.0"
    )
    out = {
        "healthz": get(probes + "/healthz")[0],
        "readyz": get(probes + "/readyz")[0],
        "content_type": kind,
        "openmetrics_content_type": om_kind,
        "prometheus": samples(prometheus(text)),
        "openmetrics": samples(openmetrics(om_text)) if om_status == 200 else [],
    }
    json.dump(out, sys.stdout)


main()
