"""The shipped alert rules and dashboard: ``promtool check rules`` and ``promtool test rules``
(series that fire each alert and series that must not, deploy/prometheus/alerts_test.yml), and
a dashboard every panel of which queries a metric the crawler serves."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from crawler.metrics import families as fam
from tests.crawling import PROJECT

RULES = PROJECT / "deploy" / "prometheus"
DASHBOARD = PROJECT / "deploy" / "grafana" / "crawler-dashboard.json"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool not installed (apt-get install prometheus)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + ": required under CI")
        pytest.skip(message)
    return found


def test_the_alert_rules_are_valid() -> None:
    done = subprocess.run([promtool(), "check", "rules", "alerts.yml"], cwd=RULES,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_each_alert_fires_on_its_series_and_not_on_the_others() -> None:
    done = subprocess.run([promtool(), "test", "rules", "alerts_test.yml"], cwd=RULES,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (RULES / "alerts_test.yml").read_text()))
    alerts = set(re.findall(r"- alert: (\w+)", (RULES / "alerts.yml").read_text()))
    assert len(alerts) == 10 and tested == alerts


def served_names() -> set[str]:
    """Every metric name the crawler serves, from its families' source."""
    source = "".join(p.read_text() for p in (
        PROJECT / "crawler" / "metrics" / "families.py",
        PROJECT / "crawler" / "extensions" / "metrics.py",
        PROJECT / "crawler" / "commands" / "frontier.py",
    ))
    names = set(re.findall(r'"([a-z_]+)",', source))
    return {fam.PREFIX + n for n in names}


def test_the_dashboard_and_the_rules_ask_only_for_metrics_the_crawler_serves() -> None:
    served = served_names()
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs.append((RULES / "alerts.yml").read_text())
    asked = {m for e in exprs for m in re.findall(r"\b(crawler_[a-z_]+?)(?:_bucket)?\b", e)}
    assert asked and asked <= served, asked - served
