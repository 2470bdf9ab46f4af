#!/usr/bin/env python3
"""test_alert_rules.py: conf/prometheus/enrichd-alerts.yml under Debian's
promtool, and against what the real daemon exports.

- `promtool check rules` and `promtool test rules` on
  tests/prometheus/enrichd-alerts.test.yml pass;
- every alert of the file has a case there that fires and one that stays
  silent (EnrichdListenQueueGrowing's includes the queue pinned at its
  backlog, where deriv() is 0);
- every enrichd_* series a rule reads is one a running enrichd exports,
  with the type the rule expects (a counter read with increase() or rate()
  is a counter), so a renamed metric cannot silently disable an alert;
- enrichd_build_info carries the Makefile's version.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import PROMTOOL  # noqa: E402

RULES = os.path.join(harness.ROOT, "conf", "prometheus", "enrichd-alerts.yml")
TESTS = os.path.join(harness.ROOT, "tests", "prometheus", "enrichd-alerts.test.yml")


def alerts_and_exprs():
    """{alert: expr text} read from the rules file (each rule's lines up to
    the next rule)."""
    with open(RULES) as f:
        text = f.read()
    out = {}
    parts = re.split(r"^\s*- alert: (\w+)\s*$", text, flags=re.M)
    for name, body in zip(parts[1::2], parts[2::2]):
        m = re.search(r"^\s*expr: (.*?)^\s*(?:for|labels):", body, re.S | re.M)
        out[name] = m.group(1) if m else ""
    return out


def test_promtool(r):
    if not r.check(os.path.exists(PROMTOOL), "promtool installed (scripts/deps.sh: prometheus)"):
        return
    p = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True,
                       timeout=60)
    r.check(p.returncode == 0, "promtool check rules: %s" % (p.stdout + p.stderr))
    p = subprocess.run([PROMTOOL, "test", "rules", os.path.basename(TESTS)], capture_output=True,
                       text=True, timeout=120, cwd=os.path.dirname(TESTS))
    r.check(p.returncode == 0 and "SUCCESS" in p.stdout,
            "promtool test rules: %s" % (p.stdout + p.stderr)[-3000:])


def test_every_alert_fires_and_stays_silent(r):
    with open(TESTS) as f:
        text = f.read()
    fires, silent = set(), set()
    for m in re.finditer(r"alertname: (\w+)\n\s*exp_alerts:(.*)\n(\s*)(.*)", text):
        name, inline, nxt = m.group(1), m.group(2).strip(), m.group(4)
        if inline == "[]":
            silent.add(name)
        elif inline == "" and nxt.startswith("- exp_labels"):
            fires.add(name)
    alerts = alerts_and_exprs()
    r.check(len(alerts) >= 12, "the rules file's alerts: %r" % sorted(alerts))
    for a in sorted(alerts):
        r.check(a in fires, "%s has a case that fires" % a)
        r.check(a in silent, "%s has a case that stays silent" % a)
    for a in ("EnrichdReloadRefused", "EnrichdRequestsLost", "EnrichdCaptureDropping",
              "EnrichdFastcgiPeersRejected", "EnrichdListenPeersRefused", "EnrichdVersionsMixed"):
        r.check(a in alerts, "rule %s exists" % a)
    r.check(re.search(r"name: queue pinned at its backlog.*?\n(?:.*\n)*?\s*values: 128x15", text)
            is not None, "the pinned-queue case: a queue at its backlog, not growing")


def test_rules_read_what_enrichd_exports(r):
    with harness.Env(name="enr-rules") as env:
        env.start_enrichd("workers = 1\n")
        env.start_nginx()
        st, _, body = env.request("/metrics", method="GET")
        r.check(st == 200, "/metrics 200")
        text = body.decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    for alert, expr in sorted(alerts_and_exprs().items()):
        for name in sorted(set(re.findall(r"\benrichd_\w+", expr))):
            r.check(name in types, "%s reads %s, which enrichd exports" % (alert, name))
            if name.endswith("_total"):
                r.check(types.get(name) == "counter", "%s is a counter (%s)" % (name, types.get(name)))
            if re.search(r"(?:increase|rate)\(\s*%s\b" % name, expr):
                r.check(types.get(name) == "counter",
                        "%s takes increase()/rate() of a counter: %s" % (alert, name))
    r.check(types.get("enrichd_requests_lost_total") == "counter"
            and "enrichd_requests_lost" not in types,
            "lost requests: a _total counter, no gauge left")
    with open(os.path.join(harness.ROOT, "Makefile")) as f:
        version = re.search(r"^VERSION := (\S+)$", f.read(), re.M).group(1)
    r.check(types.get("enrichd_build_info") == "gauge"
            and re.search(r'^enrichd_build_info\{version="%s"\} 1$' % re.escape(version), text, re.M),
            "enrichd_build_info{version=%r} 1" % version)


def main():
    harness.run_tests(
        test_promtool, test_every_alert_fires_and_stays_silent,
        test_rules_read_what_enrichd_exports)


if __name__ == "__main__":
    main()
