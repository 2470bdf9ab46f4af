#!/usr/bin/env python3
"""test_upstream.py: outbound enrichment through the real path.

HTTP client -> nginx (nginx/enrichd.conf) -> an enrichd worker -> the
fake upstream (tests/fake_upstream.py, a real HTTP server on loopback).
Checks: enrichment changes poster/duration exactly as docs/upstream.md says
and nothing else (compared line by line with an enrichment-off run);
enrichment off is byte-identical to the contract (the vectors);
5xx / malformed / bad shape / truncated / refused: local values kept,
X-Enrich-Degraded and the failure counters say so, nothing dropped;
ids are percent-encoded and never change host, scheme or path; a hung
upstream: every batch within the deadline plus a margin, the breaker
opens, and closes again through exactly one probe.
The incident replay (20,000 batches) is test_upstream_incident.py; the
helpers both use are in harness.py.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

from harness import (  # noqa: E402,F401
    BASES, FakeUpstream, upstream_conf, post, degraded, fake_duration, fake_poster,
    local_poster, metrics, fd_count, socket_inodes_to, upstream_fds, strip_clock)


def upstream_env(name, fake, workers=2, **over):
    env = harness.Env(name=name)
    env.start_enrichd("workers = %d\nmax_requests = 0\n" % workers + upstream_conf(fake, **over))
    env.start_nginx()
    return env


# ---- tests ----------------------------------------------------------------

EFFECT_RECS = [
    {"provider": "yt", "id": " AbC-123 ", "title": "  Hello  ", "duration": 0},
    {"provider": "vm", "id": "XyZ", "duration": "253"},
    {"provider": "dm", "id": "unkNown", "duration": 0},
    {"provider": "dm", "id": "unkLocal", "duration": 17},
    {"provider": "yt", "id": 12345},
    {"provider": "dm", "id": "frac1"},
    {"provider": "yt", "id": "badp1", "duration": 5},
    {"provider": "yt", "id": "badp2"},
    {"provider": "vm", "id": "badd2"},
    {"provider": "vm", "id": "long1", "duration": 9},
] + [{"provider": ("yt", "vm", "dm")[i % 3], "id": "Vid%03d" % i, "duration": i % 4,
      "blocked": ["JP"] if i % 5 == 0 else []} for i in range(60)]


def expected_on(rec, off):
    """What docs/upstream.md says the enriched line is, given the off line."""
    key = str(rec["id"]).strip(" ")
    p = rec["provider"]
    poster, dur = off["poster"], off["duration"]
    if key.startswith("unk"):
        return poster, dur
    up_poster, up_dur = fake_poster(p, key), fake_duration(key)
    if key.startswith("badp"):
        up_poster = None
    if key.startswith("badd"):
        up_dur = None
    if key.startswith("long"):
        up_poster = "https://img.example/" + "p" * (2048 - len("https://img.example/"))
    if key.startswith("frac"):
        up_dur = 12.5
    return (up_poster if up_poster is not None else poster,
            up_dur if (dur == 0 and up_dur is not None) else dur)


def test_effect(r, fake):
    with upstream_env("up-off", None) as off_env, upstream_env("up-on", fake) as on_env:
        st0, h0, off = post(off_env, EFFECT_RECS)
        st1, h1, on = post(on_env, EFFECT_RECS)
        r.check(st0 == 200 and st1 == 200 and len(off) == len(on) == len(EFFECT_RECS),
                "both answer every record: %d %d %d %d" % (st0, st1, len(off), len(on)))
        r.check("x-enrich-degraded" not in h0 and "x-enrich-degraded" not in h1,
                "no degraded header: %s / %s" % (h0.get("x-enrich-degraded"), h1.get("x-enrich-degraded")))
        bad = []
        for rec, a, b in zip(EFFECT_RECS, off, on):
            if list(a.keys()) != list(b.keys()):
                bad.append(("schema", rec, list(a), list(b)))
                continue
            for k in a:
                if k not in ("poster", "duration", "fetched_at") and a[k] != b[k]:
                    bad.append(("field " + k, rec, a[k], b[k]))
            want = expected_on(rec, a)
            if (b["poster"], b["duration"]) != want:
                bad.append(("enriched", rec, (b["poster"], b["duration"]), want))
        r.check(not bad, "enriched lines differ from docs/upstream.md only where allowed: %r" % bad[:3])
        changed = sum(1 for a, b in zip(off, on) if a["poster"] != b["poster"])
        r.check(changed >= 60, "posters actually changed: %d" % changed)
        st = fake.stats()
        r.check(st["max_ids_per_call"] <= 50 and st["bad_requests"] == 0,
                "calls well-formed: %s" % {k: st[k] for k in ("max_ids_per_call", "bad_requests")})
        # the same batch again is served (by one of the workers' caches or
        # the upstream) with identical lines
        st2, h2, again = post(on_env, EFFECT_RECS)
        r.check(st2 == 200 and [strip_clock(x) for x in again] == [strip_clock(x) for x in on],
                "a repeated batch gives the same lines")


def test_off_vectors(r):
    """upstream_url empty: the conformance vectors, byte for byte."""
    vectors = os.path.join(harness.ROOT, "tests", "vectors.py")
    with upstream_env("up-offvec", None, workers=3, max_records=200) as env:
        p = subprocess.run([sys.executable, vectors, "--url",
                            "http://127.0.0.1:%d/v1/enrich" % env.port, "--jobs", "6"],
                           capture_output=True, text=True, timeout=100)
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        r.check(p.returncode == 0 and last.endswith(" 0 failed"),
                "enrichment off: vectors byte-identical through nginx: %s\n%s" % (last, p.stdout[-2000:]))


NASTY = ["a/../../etc?x=1#frag", "&provider=vm&ids=evil", "@evil.example:80/x", "%2F%41 b",
         "\u00c4\u00d6\u00fc\U0001F600", "i\u3000d", "a,b", "x\\y\"z", "https://evil/",
         "..", "~ok-._"]


def test_encoding(r, fake):
    with upstream_env("up-enc", fake, workers=1) as env:
        fake.reset()
        recs = [{"provider": "yt", "id": i} for i in NASTY]
        st, h, lines = post(env, recs)
        r.check(st == 200 and len(lines) == len(NASTY) and degraded(h) == 0,
                "nasty ids: 200, all there, none degraded: %d %d %s" % (st, len(lines), h.get("x-enrich-degraded")))
        s = fake.stats()
        r.check(s["bad_requests"] == 0 and s["bad_encoding"] == 0,
                "every id percent-encoded (unreserved kept): %d bad, %d badly encoded"
                % (s["bad_requests"], s["bad_encoding"]))
        r.check(s["hosts"] == ["127.0.0.1:%d" % fake.port], "one host only: %r" % s["hosts"])
        targets = s["last_targets"]
        r.check(targets and all(t.startswith("/v1/meta?provider=yt&ids=") and t.count("?") == 1
                                and "#" not in t and t.count("&") == 1 for t in targets),
                "path and query shape fixed by the config: %r" % targets)
        for rec, line in zip(recs, lines):
            r.check(line["poster"] == fake_poster("yt", rec["id"]),
                    "id %r round-trips to its poster: %r" % (rec["id"], line["poster"]))


FAULTS = [("5xx", "status"), ("malformed", "body"), ("badshape", "body"),
          ("truncated", "body"), ("refuse", "connect"), ("hang", "timeout")]


def test_faults(r, fake):
    with upstream_env("up-fault", fake, workers=2, upstream_timeout_ms=150,
                      breaker_failures=1000, breaker_window=0) as env:
        for mode, kind in FAULTS:
            before = metrics(env).get('enrichd_upstream_failures_total{kind="%s"}' % kind, 0)
            fake.control(mode=mode)
            recs = [{"provider": ("yt", "vm", "dm")[i % 3], "id": "%s-Id%d" % (mode, i),
                     "duration": i * 3} for i in range(9)]
            # The control, as in test_hang_breaker: the same batch's shape
            # with a provider outside the contract (no upstream part), just
            # before: the path's own time under this moment's load.
            t0 = harness.time.monotonic()
            cst, _, _ = post(env, [{"provider": "xx", "id": "Ctl-%s%d" % (mode, i)}
                                   for i in range(9)])
            ctl = harness.time.monotonic() - t0
            r.check(cst == 200, "%s: control answered (%d)" % (mode, cst))
            t0 = harness.time.monotonic()
            st, h, lines = post(env, recs)
            took = harness.time.monotonic() - t0
            r.check(st == 200 and len(lines) == 9, "%s: 200 with every record: %d %d" % (mode, st, len(lines)))
            r.check(degraded(h) == 9, "%s: X-Enrich-Degraded: 9 (got %s)" % (mode, h.get("x-enrich-degraded")))
            r.check(took < 0.15 + 0.25 + ctl, "%s: answered in %.0f ms (< 150 ms + 250 ms + the "
                    "control's %.0f ms)" % (mode, took * 1000, ctl * 1000))
            ok = all(l["poster"] == local_poster(rec["provider"], rec["id"].lower())
                     and l["duration"] == rec["duration"] for rec, l in zip(recs, lines))
            r.check(ok, "%s: local values kept" % mode)
            after = metrics(env).get('enrichd_upstream_failures_total{kind="%s"}' % kind, 0)
            r.check(after >= before + 3, "%s: failures{kind=%s} %d -> %d" % (mode, kind, before, after))
            fake.control(mode="ok")
        # after the faults, the same env enriches again (failures were not cached)
        recs = [{"provider": "yt", "id": "5xx-Id0"}]
        st, h, lines = post(env, recs)
        r.check(st == 200 and degraded(h) == 0 and lines[0]["poster"] == fake_poster("yt", "5xx-Id0"),
                "recovered: enriched again")


def test_partial(r, fake):
    with upstream_env("up-part", fake, workers=1) as env:
        fake.control(mode="partial")
        recs = [{"provider": "dm", "id": "Part%d" % i} for i in range(30)]
        st, h, lines = post(env, recs)
        fake.control(mode="ok")
        import zlib
        answered = [zlib.crc32(("Part%d" % i).encode()) % 2 == 0 for i in range(30)]
        got = [l["poster"].startswith("https://img.example/") for l in lines]
        r.check(st == 200 and degraded(h) == 0 and got == answered and 0 < sum(got) < 30,
                "partial answers: answered ids enriched, the rest unknown, none degraded (%d/30)" % sum(got))


def test_hang_breaker(r, fake):
    # The cooldown outlasts the 16 batches below on a loaded machine (a
    # probe among them would be a fourth timeout); it is waited out after.
    cooldown_s = 3.0
    with upstream_env("up-hang", fake, workers=1, upstream_timeout_ms=150, breaker_failures=3,
                      breaker_cooldown_ms=int(cooldown_s * 1000)) as env:
        post(env, [{"provider": "yt", "id": "warm"}])  # a connection in the pool
        fake.control(mode="hang")
        lat, ctl = [], []
        for i in range(8):
            # The control: a batch the upstream has no part in (a provider
            # outside the contract, rejected), just before each: the path's
            # own time under the machine's load at that moment.
            t0 = harness.time.monotonic()
            cst, _, _ = post(env, [{"provider": "xx", "id": "Ctl%d" % i}])
            ctl.append(round((harness.time.monotonic() - t0) * 1000))
            r.check(cst == 200, "hang: control %d answered (%d)" % (i, cst))
            t0 = harness.time.monotonic()
            st, h, lines = post(env, [{"provider": "vm", "id": "Hang%d" % i, "duration": 4}])
            took = harness.time.monotonic() - t0
            lat.append(round(took * 1000))
            if i == 2:
                opened_by = harness.time.monotonic()  # the third timeout opened it
            r.check(st == 200 and degraded(h) == 1 and lines[0]["duration"] == 4,
                    "hang: batch %d answered with local values" % i)
        print("hang: batches %r ms, controls %r ms" % (lat, ctl))
        over = max(ctl)
        r.check(max(lat) <= 150 + 100 + over,
                "hang: every batch within 150 ms + 100 ms margin + the control's %d ms: %r "
                "(controls %r)" % (over, lat, ctl))
        r.check(max(lat[3:]) < 100 + over, "breaker open: later batches do not wait for the "
                "upstream (< 100 ms + the control's %d ms): %r (controls %r)" % (over, lat, ctl))
        m = metrics(env)
        r.check(m.get('enrichd_upstream_breakers{state="open"}') == 1, "breaker open in metrics")
        r.check(m.get('enrichd_upstream_failures_total{kind="timeout"}', 0) == 3,
                "3 timeouts then no call: %s" % m.get('enrichd_upstream_failures_total{kind="timeout"}'))
        opened = env.log_events("upstream breaker transition")
        r.check(any(e.get("to") == "open" for e in opened), "breaker opening logged")
        fake.control(mode="ok")
        d0 = fake.stats()["data_requests"]
        harness.time.sleep(max(0.0, opened_by + cooldown_s + 0.1 - harness.time.monotonic()))
        recs = [{"provider": "yt", "id": "Probe1"}, {"provider": "vm", "id": "Probe2"},
                {"provider": "dm", "id": "Probe3"}]
        st, h, lines = post(env, recs)
        d1 = fake.stats()["data_requests"]
        r.check(d1 == d0 + 1, "half_open: exactly one probe call (%d)" % (d1 - d0))
        r.check(st == 200 and degraded(h) == 2 and lines[0]["poster"] == fake_poster("yt", "Probe1"),
                "the probe's records enriched, the rest kept local values (%s)" % h.get("x-enrich-degraded"))
        trans = [(e.get("from"), e.get("to")) for e in env.log_events("upstream breaker transition")]
        r.check(trans[-2:] == [("open", "half_open"), ("half_open", "closed")],
                "open -> half_open -> closed logged: %r" % trans)
        st, h, lines = post(env, recs)
        r.check(st == 200 and degraded(h) == 0, "closed again: everything enriched")
        m = metrics(env)
        r.check(m.get('enrichd_upstream_breakers{state="closed"}') == 1, "breaker closed in metrics")


def main():
    r = harness.Results()
    with FakeUpstream() as fake:
        r.run(test_effect, fake)
        r.run(test_encoding, fake)
        r.run(test_faults, fake)
        r.run(test_partial, fake)
        r.run(test_hang_breaker, fake)
    r.run(test_off_vectors)
    r.done()


if __name__ == "__main__":
    main()
