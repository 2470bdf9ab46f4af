#!/usr/bin/env python3
"""test_source_extra.py: a fourth API is its file and one list entry.

The extra build (-DENR_TEST_SOURCE, make extra: build-extra/) adds one
row to src/base/sources.h (ENR_SOURCE_EXTRA) and one file,
src/upstream/api_extra.c: an API that serves YouTube's records and
speaks the aggregator's wire format, so tests/fake_upstream.py answers it.
Nothing else in the tree names it.  This suite shows that everything an
API needs follows from those two:
  - its keys, in -T, with the row's defaults, after the other APIs' in
    the list's order (extra_cache_ttl_s, extra_daily_quota, extra_url,
    extra_key_file, extra_key_credential);
  - the source checks: yt_source = extra needs its key (named by the
    row's noun), and vm_source = extra is refused (it serves yt);
  - HTTP client -> nginx -> enrichd -> the fake: a batch of YouTube
    records enriched through it, 20 ids a call (its descriptor's), its
    key in its header, its calls counted under source="extra" in
    /metrics and under sources.extra in /status?json, the other
    providers' records untouched.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import FakeUpstream, post, degraded  # noqa: E402

KEY = "xk-" + os.urandom(8).hex()


def extra_build():
    return harness.flagged_build_dir("ENR_EXTRA_BUILD", "build-extra", "ENR_TEST_SOURCE")


def write_key(d):
    path = os.path.join(d, "extra.key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (KEY + "\n").encode())
    os.close(fd)
    return path


def check_conf(build, text):
    """enrichd -t on text: (exit status, stderr)."""
    d = tempfile.mkdtemp(prefix="enr-extra-t-")
    try:
        conf = os.path.join(d, "enrichd.conf")
        with open(conf, "w") as f:
            f.write(text)
        p = subprocess.run([os.path.join(build, "enrichd"), "-t", "-c", conf],
                           capture_output=True, text=True, timeout=20)
        return p.returncode, p.stderr
    finally:
        harness.discard_dir(d)


def test_keys(r, fake):
    build = extra_build()
    d = tempfile.mkdtemp(prefix="enr-extra-T-")
    try:
        conf = os.path.join(d, "enrichd.conf")
        with open(conf, "w") as f:
            f.write("workers = 1\n")
        p = subprocess.run([os.path.join(build, "enrichd"), "-T", "-c", conf],
                           capture_output=True, text=True, timeout=20)
    finally:
        harness.discard_dir(d)
    keys = [l.split("=")[0].strip() for l in p.stdout.splitlines() if "=" in l]
    vals = dict((l.split("=")[0].strip(), l.split("=", 1)[1].split("#")[0].strip())
                for l in p.stdout.splitlines() if "=" in l)
    want = {"extra_cache_ttl_s": "600", "extra_daily_quota": "0",
            "extra_url": "http://127.0.0.1:9/v1", "extra_key_file": "",
            "extra_key_credential": ""}
    r.check(p.returncode == 0 and all(vals.get(k) == v for k, v in want.items()),
            "-T prints the row's keys with its defaults: %r" %
            {k: vals.get(k) for k in want})
    r.check(all(k in keys for k in ("dailymotion_cache_ttl_s", "dailymotion_url")) and
            keys.index("extra_cache_ttl_s") == keys.index("dailymotion_cache_ttl_s") + 1 and
            keys.index("extra_url") == keys.index("dailymotion_url") + 1 and
            keys.index("extra_key_file") + 1 == keys.index("extra_key_credential"),
            "each key after the same key of the API before it in the list")
    rc, err = check_conf(build, "yt_source = extra\n")
    r.check(rc != 0 and "extra needs extra_key_file or extra_key_credential (the test key)" in err,
            "yt_source = extra needs its key, called by its row's noun: %r" % err.strip())
    rc, err = check_conf(build, "vm_source = extra\n")
    r.check(rc != 0 and "extra is the API of another provider's videos" in err,
            "vm_source = extra refused (it serves yt): %r" % err.strip())
    rc, err = check_conf(build, "yt_source = extra\nextra_key_credential = k\nextra_url =\n")
    r.check(rc != 0 and "extra needs extra_url" in err, "and its URL: %r" % err.strip())


def test_enrich(r, fake):
    build = extra_build()
    with harness.Env(build=build, name="enr-extra") as env:
        base = fake.url[:-len("/meta")]  # http://127.0.0.1:PORT/v1
        env.start_enrichd("workers = 1\nyt_source = extra\nvm_source = off\ndm_source = off\n"
                          "extra_url = %s\nextra_key_file = %s\nextra_cache_ttl_s = 60\n"
                          "extra_daily_quota = 100000\nupstream_timeout_ms = 1000\n"
                          % (base, write_key(env.dir)))
        env.start_nginx()
        fake.control(mode="ok")
        fake.reset()
        recs = [{"provider": "yt", "id": "ex%d" % i, "duration": 0} for i in range(45)]
        recs += [{"provider": "vm", "id": "vmx1", "duration": 0}]
        st, h, lines = post(env, recs)
        s = fake.stats()
        r.check(st == 200 and degraded(h) == 0 and len(lines) == len(recs),
                "the batch enriched: %d, degraded %s" % (st, h.get("x-enrich-degraded")))
        r.check(all(l["poster"] == harness.fake_poster("yt", rec["id"])
                    for rec, l in zip(recs[:45], lines[:45])),
                "every YouTube record has the fake's poster, through the extra API")
        r.check(lines[45]["poster"] != harness.fake_poster("vm", "vmx1"),
                "the Vimeo record (its source off) is not asked for")
        r.check(s["data_requests"] == 3 and s["max_ids_per_call"] == 20 and
                s["calls_by_provider"] == {"yt": 3},
                "20 ids a call, the descriptor's: %r" %
                {k: s.get(k) for k in ("data_requests", "max_ids_per_call", "calls_by_provider")})
        r.check(all(t.startswith("/v1/meta?provider=yt&ids=") for t in s["last_targets"]),
                "its URL: %r" % s["last_targets"][:1])
        r.check(s["last_headers"] and all(x.get("X-Extra-Key") == KEY for x in s["last_headers"]),
                "its key in its header, read from extra_key_file")
        m = harness.metrics(env)
        r.check(m.get('enrichd_upstream_calls_total{source="extra"}') == 3 and
                m.get('enrichd_upstream_ids_asked_total{source="extra"}') == 45 and
                m.get('enrichd_upstream_quota_units_total{source="extra"}') == 3,
                "/metrics counts its calls, ids and units under source=\"extra\": %r" %
                {k: v for k, v in m.items() if 'source="extra"' in k and "_total" in k})
        j = harness.get_json(env, "/status?json")
        src = j.get("upstream", {}).get("sources", {})
        r.check(src.get("extra", {}).get("calls") == 3 and src.get("extra", {}).get("found") == 45,
                "/status?json: sources.extra: %r" % {k: src.get("extra", {}).get(k)
                                                      for k in ("calls", "found")})
        # A second batch of the same ids: its answers were cached for it.
        st, h, lines = post(env, recs[:45])
        n, hits = fake.stats()["data_requests"], harness.metrics(env).get(
            'enrichd_upstream_cache_hits_total{source="extra"}')
        r.check(st == 200 and n == s["data_requests"] and hits == 45,
                "the same ids again: answered from the cache, no call (%d calls, was %d; "
                "%s hits)" % (n, s["data_requests"], hits))


def main():
    harness.run_tests(test_keys, test_enrich, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
