#!/usr/bin/env python3
"""test_upstream_pause_hup.py: a provider's pause of the longest kind, shown
on every surface with its end, and ended by the operator's HUP with the
cache kept (src/upstream/quota.h: enr_quota_resume).

HTTP client -> nginx -> enrichd (2 workers) -> the fake upstream.  For each
of Retry-After 3600, 99999999 and an HTTP-date in the year 9999 (each
clamped to the hour):
  - one 429 pauses the host: the next batch of new ids makes no call;
  - the pause and its end (wall clock, UTC) are in /status JSON, in
    /status?text and `enrichd status` (a line of its own), and on the
    HTML page;
  - the provider healthy again, a HUP: the next batch of new ids calls
    the provider and is enriched, the records cached before the pause are
    still answered from the cache (no call), and every surface says the
    pause is over.
"""

import calendar
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import FakeUpstream, upstream_conf, post, degraded  # noqa: E402

HOUR_S = 3600
RESUMED = "reload: the provider's pause ended early, calls resume"


def fresh(tag, n=6):
    return [{"provider": ("yt", "vm", "dm")[i % 3], "id": "%s-%d" % (tag, i)} for i in range(n)]


def calls(fake):
    return fake.stats()["data_requests"]


def cli_status(env):
    p = subprocess.run([os.path.join(env.build, "enrichd"), "status", env.status_sock],
                       capture_output=True, text=True, timeout=15)
    return p.stdout


def iso_to_unix(s):
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def check_paused(r, env, what):
    up = harness.get_json(env, "/status")["upstream"]
    left, until = up.get("pause_ms_left", 0), up.get("pause_until")
    r.check(HOUR_S * 1000 - 5000 <= left <= HOUR_S * 1000,
            "%s: /status pause_ms_left is the hour's cap (%r)" % (what, left))
    ok = isinstance(until, str)
    end = iso_to_unix(until) if ok else 0
    r.check(ok and abs(end - (time.time() + left / 1000.0)) <= 3,
            "%s: /status pause_until is its end on the wall clock (%r, now %d)"
            % (what, until, time.time()))
    if not ok:
        return
    line = "upstream paused until %s" % until
    _, _, text = env.request("/status?text", method="GET")
    r.check(line in text.decode(), "%s: /status?text says %r" % (what, line))
    out = cli_status(env)
    r.check(out.startswith(line), "%s: `enrichd status` says so first: %r" % (what, out[:120]))
    _, _, html = env.request("/status?html", method="GET")
    r.check(("paused until %s" % until) in html.decode(),
            "%s: the HTML page says paused until %s" % (what, until))


def check_resumed(r, env, what):
    up = harness.get_json(env, "/status")["upstream"]
    r.check(up.get("pause_ms_left") == 0 and up.get("pause_until") is None,
            "%s: /status: no pause (%r, %r)" % (what, up.get("pause_ms_left"),
                                               up.get("pause_until")))
    _, _, text = env.request("/status?text", method="GET")
    r.check("upstream paused" not in text.decode(), "%s: /status?text: no pause line" % what)
    r.check("upstream paused" not in cli_status(env), "%s: `enrichd status`: no pause line" % what)
    _, _, html = env.request("/status?html", method="GET")
    r.check(b"not paused" in html, "%s: the HTML page says not paused" % what)


def one_round(r, env, fake, k, retry_after, what):
    fake.control(mode="ok")
    cached = fresh("cached%d" % k)
    st, h, _ = post(env, cached)
    r.check(st == 200 and degraded(h) == 0, "%s: a batch enriched and cached first" % what)

    fake.control(mode="429", retry_after=retry_after, throttle_status=429)
    st, h, _ = post(env, fresh("first%d" % k))
    r.check(st == 200 and degraded(h) == 6, "%s: the throttled batch keeps its local values"
            % what)
    fake.control(mode="ok")
    c0 = calls(fake)
    st, h, _ = post(env, fresh("during%d" % k))
    r.check(st == 200 and degraded(h) == 6 and calls(fake) == c0,
            "%s: paused: new ids make no call (%d calls)" % (what, calls(fake) - c0))
    check_paused(r, env, what)

    seen = len(env.log_events(RESUMED))
    reloads = len(env.log_events("reload done"))
    env.signal(signal.SIGHUP)
    env.wait_log("reload done", count=reloads + 1, timeout=15)
    evs = env.log_events(RESUMED)
    r.check(len(evs) == seen + 1 and int(evs[-1].get("pause_ms_left", 0)) > (HOUR_S - 60) * 1000,
            "%s: the HUP logs the pause it ended (%r)" % (what, evs[-1:]))
    c1 = calls(fake)
    st, h, _ = post(env, fresh("after%d" % k))
    r.check(st == 200 and degraded(h) == 0 and calls(fake) > c1,
            "%s: after the HUP new ids call the provider and are enriched (%d calls, %s degraded)"
            % (what, calls(fake) - c1, h.get("x-enrich-degraded")))
    c2 = calls(fake)
    st, h, _ = post(env, cached)
    r.check(st == 200 and degraded(h) == 0 and calls(fake) == c2,
            "%s: the cache kept: the batch cached before the pause makes no call (%d)"
            % (what, calls(fake) - c2))
    check_resumed(r, env, what)


def test_hup_ends_pause(r, fake):
    with harness.Env(name="pause-hup") as env:
        env.start_enrichd("workers = 2\nmax_requests = 0\n" +
                          upstream_conf(fake, upstream_timeout_ms=500))
        env.start_nginx()
        check_resumed(r, env, "at start")
        for k, (ra, what) in enumerate((
                ("3600", "Retry-After: 3600"),
                ("99999999", "Retry-After: 99999999"),
                ("Fri, 31 Dec 9999 23:59:59 GMT", "Retry-After in the year 9999"))):
            one_round(r, env, fake, k, ra, what)


def main():
    harness.run_tests(test_hup_ends_pause, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
