"""The dashboard and the alerting rules in monitoring/, read as Grafana and Prometheus read
them: the dashboard's JSON, a query in every panel, unique ids, the data source a variable;
every alert with what an operator needs to act and a promtool test case where it fires and
one where it does not. promtool itself runs in tests/real/test_monitoring_real.py."""

from __future__ import annotations

import re
from collections import Counter

import yaml

from components.upstream import toolchain
from tests.helpers.monitoring import (
    GRAFANA_VARIABLES,
    ROOT,
    RULE_TESTS,
    RULES,
    alerts,
    as_prometheus_gets_it,
    dashboard,
    exposition,
    family_of,
    panels,
)

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_the_dashboard_has_a_uid_and_a_data_source_to_choose() -> None:
    board = dashboard()
    assert board["uid"] and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"


def test_every_panel_has_a_query_and_a_unique_id() -> None:
    board = dashboard()
    every = list(panels(board))
    assert len(every) > 20
    ids = Counter(p["id"] for p in board["panels"])
    assert all(n == 1 for n in ids.values()), ids
    for panel in every:
        targets = panel.get("targets") or []
        assert targets, f"panel {panel['title']!r} has no query"
        assert all(t.get("expr", "").strip() for t in targets), panel["title"]
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]
        assert panel.get("description"), f"panel {panel['title']!r} says nothing of itself"


def test_every_panel_and_query_reads_the_chosen_data_source() -> None:
    board = dashboard()
    for panel in panels(board):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, (panel["title"], target["refId"])
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]


def test_the_only_grafana_variables_in_queries_are_those_the_name_check_fills() -> None:
    """tests/real fills these before asking Prometheus' parser for the metric names."""
    used = {
        found
        for panel in panels(dashboard())
        for target in panel["targets"]
        for found in re.findall(r"\$\{?\w+", target["expr"])
    }
    assert used <= set(GRAFANA_VARIABLES), used - set(GRAFANA_VARIABLES)
    assert as_prometheus_gets_it("label_values(kueue_build_info, fleet_cluster)") == (
        "kueue_build_info"
    )


def headings(path: str) -> set[str]:
    """GitHub's anchors of a page's headings."""
    text = (ROOT / path).read_text()
    return {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in text.splitlines()
        if line.startswith("#")
    }


def test_every_alert_tells_an_operator_what_to_do_and_where_to_read() -> None:
    found = alerts()
    assert {a["alert"] for a in found} >= {
        "MultiKueueWorkerUnhealthy",
        "MultiKueueDispatcherNoLeader",
        "KueueWorkloadsPendingTooLong",
        "MultiKueueDispatcherWriteErrors",
        "MultiKueueWorkerViewStale",
    }
    for alert in found:
        annotations = alert["annotations"]
        assert annotations.get("summary") and annotations.get("description"), alert["alert"]
        assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
        page, _, anchor = annotations["runbook"].partition("#")
        assert anchor in headings(page), f"{alert['alert']}: no heading #{anchor} in {page}"
        for section in re.findall(r'docs/(\w+\.md), "([^"]+)"', annotations["description"]):
            assert f"# {section[1]}" in (ROOT / "docs" / section[0]).read_text(), section


def test_every_alert_has_a_promtool_case_where_it_fires_and_one_where_it_does_not() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == [RULES.name]
    fires, quiet = set(), set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (fires if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {a["alert"] for a in alerts()}
    assert not names - fires, f"no promtool case where these fire: {sorted(names - fires)}"
    assert not names - quiet, f"no promtool case where these stay quiet: {sorted(names - quiet)}"
    assert fires | quiet <= names, f"cases of no alert: {sorted((fires | quiet) - names)}"


def test_a_sample_name_maps_to_the_family_its_page_declares() -> None:
    page = "\n".join(
        [
            "# TYPE mkf_nominations counter",  # Python's client: the family without _total
            'mkf_nominations_total{cluster="worker1"} 2.0',
            "# TYPE kueue_admission_attempts_total counter",  # Go's: with it
            "# TYPE mkf_dispatch_decision_seconds histogram",
            'mkf_dispatch_decision_seconds_bucket{le="+Inf"} 1.0',
            "mkf_dispatch_decision_seconds_count 1.0",
            "# TYPE mkf_leader gauge",
            "mkf_leader 1.0",
        ]
    )
    samples, declared = exposition(page)
    assert samples == {
        "mkf_nominations_total",
        "mkf_dispatch_decision_seconds_bucket",
        "mkf_dispatch_decision_seconds_count",
        "mkf_leader",
    }
    assert family_of("mkf_nominations_total", declared) == "mkf_nominations"
    assert family_of("kueue_admission_attempts_total", declared) == (
        "kueue_admission_attempts_total"
    )
    assert family_of("mkf_dispatch_decision_seconds_sum", declared) == (
        "mkf_dispatch_decision_seconds"
    )
    assert family_of("mkf_dispatch_decision_seconds", declared) == "mkf_dispatch_decision_seconds"
    assert family_of("mkf_leader_total", declared) is None  # a gauge has no _total
    assert family_of("mkf_leader_bucket", declared) is None


def test_promtool_is_built_from_its_pinned_module_with_the_real_engines() -> None:
    tool = toolchain.TOOLS["promtool"]
    assert toolchain.module_versions(tool.module_dir)[tool.module] == "v0.316.0"
    assert tool.version() == "3.16.0"  # the release that module version is (its VERSION)
    assert "tool github.com/prometheus/prometheus/cmd/promtool" in (
        (tool.module_dir / "go.mod").read_text()
    )
    build = next(
        line
        for line in (ROOT / "scripts" / "test.sh").read_text().replace("\\\n", " ").splitlines()
        if "build: real engines" in line
    )
    assert "promtool" in build.split(), build
