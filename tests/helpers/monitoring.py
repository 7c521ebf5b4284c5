"""The fleet's dashboard and alerting rules (monitoring/) as the tests read them: every PromQL
expression they hold, the metric names in one (found by Prometheus' own parser, through
promtool), and the names a /metrics page exports."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "monitoring"
RULES = MONITORING / "alerts.yaml"
RULE_TESTS = MONITORING / "alerts_test.yaml"
DASHBOARD = MONITORING / "fleet-dashboard.json"

# What Grafana puts in place of its variables before a query reaches Prometheus: a range for
# $__rate_interval, and for the cluster selector its "All" value (the dashboard's allValue).
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$cluster": ".*"}
# A label matcher promtool adds to every vector selector of a query: what precedes it in the
# query promtool prints back is that selector's metric name.
MARKER = "mkf_selector_marker"
SELECTOR = re.compile(r'([A-Za-z_:][A-Za-z0-9_:]*)?\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}')


# The Prometheus Operator's CRDs, from the module tools/prometheus-operator pins.
OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
OPERATOR_VERSION = "v0.85.0"
OPERATOR_CRDS = ("servicemonitors", "prometheusrules", "podmonitors")


def operator_crds() -> list[dict[str, Any]]:
    """The operator's CRDs for the kinds `monitoring.prometheusOperator` uses, as its release
    installs them (example/prometheus-operator-crd in its module, checked by go.sum)."""
    from components.upstream.gomodule import module_dir

    folder = module_dir(OPERATOR_MODULE, OPERATOR_VERSION, ROOT / "tools" / "prometheus-operator")
    return [
        yaml.safe_load(
            (
                folder
                / "example"
                / "prometheus-operator-crd"
                / f"monitoring.coreos.com_{name}.yaml"
            ).read_text()
        )
        for name in OPERATOR_CRDS
    ]


def operator_howto() -> tuple[dict[str, Any], str]:
    """docs/operations.md, "Deploy them with the Prometheus Operator": the stack setting the
    page shows (its `monitoring` mapping) and the line it says `up` gives for a cluster
    without the operator's CRDs."""
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page.split("### Deploy them with the Prometheus Operator", 1)[1]
    section = section.split("\n## ", 1)[0].split("\n### ", 1)[0]
    setting = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    said = section.split("```text\n", 1)[1].split("```", 1)[0].strip()
    return yaml.safe_load(setting)["config"]["multikueue-fleet:monitoring"], said


def rules() -> list[dict[str, Any]]:
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel but rows, including those inside a collapsed row."""
    for panel in board.get("panels") or []:
        if panel.get("type") == "row":
            yield from panel.get("panels") or []
        else:
            yield panel


def queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every rule and every dashboard query, Grafana's variables filled in
    as Grafana fills them."""
    found = [(f"{RULES.name}: {r.get('alert') or r.get('record')}", r["expr"]) for r in rules()]
    board = dashboard()
    for panel in panels(board):
        for target in panel.get("targets") or []:
            found.append((f"{DASHBOARD.name}: {panel['title']} {target['refId']}", target["expr"]))
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            found.append((f"{DASHBOARD.name}: variable {variable['name']}", variable["definition"]))
    return [(where, as_prometheus_gets_it(expr)) for where, expr in found]


def as_prometheus_gets_it(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    # label_values(metric, label) is Grafana's, not PromQL: Grafana asks for the series of
    # the metric, so the selector is what must parse and name exported metrics.
    found = re.fullmatch(r"label_values\((.+),\s*\w+\)", expr.strip())
    return found.group(1) if found else expr


def metric_names(promtool: Path, expr: str) -> set[str]:
    """The metric names of every vector selector in `expr`, as Prometheus' parser sees them
    (promtool's experimental `promql label-matchers set` parses the query, adds a matcher to
    each selector and prints the query back). Raises ValueError when the query does not
    parse or has a selector without a metric name."""
    result = subprocess.run(
        [str(promtool), "--experimental", "promql", "label-matchers", "set", expr, MARKER, "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ValueError(f"promtool does not parse {expr!r}: {result.stderr.strip()}")
    names: set[str] = set()
    for match in SELECTOR.finditer(result.stdout):
        name, matchers = match.group(1), match.group(2)
        if f'{MARKER}="1"' not in matchers:
            continue
        named = re.search(r'__name__="([^"]+)"', matchers)
        if not name and not named:
            raise ValueError(f"a selector without a metric name in {expr!r}")
        names.add(name or named.group(1))  # type: ignore[union-attr]
    return names


def exposition(text: str) -> tuple[set[str], dict[str, str]]:
    """(the sample names a /metrics page has samples of, each family its `# TYPE` line
    declares with that type). A family declared with no sample yet is a vector none of whose
    label sets has been used (Python's client declares those; Go's leaves them out)."""
    samples: set[str] = set()
    declared: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            declared[name] = kind
        elif line and not line.startswith("#"):
            samples.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return samples, declared


def family_of(name: str, declared: dict[str, str]) -> str | None:
    """The declared family a sample name belongs to: a histogram's _bucket, _sum and _count,
    a summary's _sum and _count, a counter's name with or without _total (Python's client
    declares `x` for the samples `x_total`, Go's declares `x_total`)."""
    if name in declared:
        return name
    for suffix, kinds in (
        ("_bucket", ("histogram",)),
        ("_sum", ("histogram", "summary")),
        ("_count", ("histogram", "summary")),
        ("_total", ("counter",)),
    ):
        base = name.removesuffix(suffix)
        if base != name and declared.get(base) in kinds:
            return base
    return None


def scrape(url: str, token: str | None = None) -> str:
    """A /metrics page. Kueue serves its own over HTTPS with a certificate it made itself at
    start (no metrics certificate is mounted), and lets in a bearer token that may GET
    /metrics (its ClusterRole kueue-metrics-reader): the names are what is checked here, not
    the certificate."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(request, timeout=10, context=context) as page:
        return page.read().decode()
