#!/usr/bin/env python3
"""test_providers_h1.py: the three APIs behind an origin that speaks
HTTP/1.1 alone (a TLS-terminating egress proxy, an API edge without h2:
the TLS listeners offer no h2 in ALPN), 50 ms away, with the shipped
defaults (the sources, their URLs, key, token and CA aside; YouTube's
day's budget at its default).

Over HTTP/2 a batch's calls to one API share one warm connection. Over
HTTP/1.1 each call needs a connection of its own, so the second call of a
batch to one API used to make one: TCP and TLS, two round trips before
its request, past the 150 ms deadline; the timeouts opened the breaker
and its cooldown took the next batches down too (this suite before the
fix: 40 % of YouTube's records enriched, 44 % of Vimeo's).

  (a) h1: sequential batches of 200 new ids, 70 YouTube, 70 Vimeo, 60
      Dailymotion (2 + 2 + 1 calls): every API call went out on a
      connection opened ahead of the batch (the APIs' nginx: the
      request was not its connection's first; a warm-up came first) - what
      the bug is, whatever the machine's load; >= 99 % of known ids
      enriched per API (the deadline is the contract, the shipped one);
      no breaker opened; the warm-ups are HEADs of the origin's root
      without the key or the token (YouTube spent no quota unit on them,
      the day's budget counts exactly the videos.list calls the API
      counted: no unit for a request that never left); YouTube and Vimeo
      end connections during the run (nginx's keepalive_requests), and
      the batches after still find warm ones

What a call stuck in set-up at its deadline is (the path's failure:
`deadline`, no breaker) is tests/unit/test_upconn.c's, against a listener
that never completes a connection.
"""
# Side by side on every build: the 99 % enriched is a goal, judged by
# make bench-goals, which runs it alone; where every call went, the
# breakers, the warm-ups and the budget are checked wherever it runs
# (they held side by side on the sanitizer build, the slower one).
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import providers_fixture as pf  # noqa: E402
from harness import post  # noqa: E402

# One worker, so that its connections to YouTube and Vimeo carry past
# nginx's keepalive_requests (100) in the run: the API ends them, and the
# batches after must still find warm ones.
WORKERS = 1
RTT_MS = 50
GOAL = 0.99
BATCHES = int(os.environ.get("ENR_PROVIDERS_BATCHES", "120"))
WARM_BATCHES = 5
MIX = (("yt", 70), ("vm", 70), ("dm", 60))  # 2 + 2 + 1 calls a batch
# A sanitizer build's worker passes the shipped RSS bounds and would be
# recycled (its connections with it) or stopped mid-batch: off there.
SAN = harness.is_sanitized(harness.build_dir())
RSS_OFF = "rss_soft_mb = 0\nrss_hard_mb = 0\n" if SAN else ""


def h1_batch(tag, n_of=MIX):
    """Records of new ids, grouped by provider as MIX says."""
    recs = []
    for p, n in n_of:
        for i in range(n):
            recs.append({"provider": p, "id": pf.new_id(p, tag, i), "duration": 0})
    return recs


def share_by_api(recs, lines):
    """{api: [known, enriched]} for one batch."""
    out = {api: [0, 0] for api in pf.APIS}
    for rec, line in zip(recs, lines):
        w = pf.want(rec)
        if w is None:
            continue
        k = out[pf.API_OF[rec["provider"]]]
        k[0] += 1
        k[1] += (line.get("poster"), line.get("duration")) == w
    return out


def sources(env):
    return harness.get_json(env, "/status")["upstream"]["sources"]


def test_h1(r, prov):
    prov.reset()
    prov.fakes["vimeo"].control(rate_limit=pf.RUN_RATE_LIMIT)
    prov.fakes["vimeo"].new_window()
    q0 = prov.fakes["youtube"].stats()["settings"]["quota_used"]
    seen0 = {api: len(prov.nginx.requests(api)) for api in pf.APIS}
    env = pf.start_env(prov, "prov-h1", WORKERS, RTT_MS, RSS_OFF, youtube_daily_quota=None)
    tot = {api: [0, 0] for api in pf.APIS}
    bad = 0
    try:
        for i in range(WARM_BATCHES + BATCHES):
            recs = h1_batch("h1w%d" % i if i < WARM_BATCHES else "h1m%d" % i)
            st, h, lines = post(env, recs)
            if st != 200 or len(lines) != len(recs):
                bad += 1
                continue
            if i < WARM_BATCHES:
                continue
            for api, (k, e) in share_by_api(recs, lines).items():
                tot[api][0] += k
                tot[api][1] += e
        time.sleep(0.3)  # the last batch's detached calls, if any, end
        src = sources(env)
        opened = [e for e in env.log_events("upstream breaker transition")]
    finally:
        env.close()
    share = {api: e / max(1, k) for api, (k, e) in tot.items()}
    print("h1: %d batches of %s, %d ms away, HTTP/1.1 only: enriched %s" % (
        BATCHES, dict(MIX), RTT_MS, {a: "%.2f %%" % (100 * s) for a, s in share.items()}))
    r.check(bad == 0, "h1: every batch 200 with every record (%d not)" % bad)
    reqs = {api: prov.nginx.requests(api)[seen0[api]:] for api in pf.APIS}
    for api in pf.APIS:
        gets = [x for x in reqs[api] if x["method"] == "GET"]
        cold = [x for x in gets if x["nth"] == 1]
        print("h1: %s: %d calls, %d of them on a connection's first request; %d warm-ups" % (
            api, len(gets), len(cold), sum(1 for x in reqs[api] if x["method"] == "HEAD")))
        r.check(gets and not cold and all(x["protocol"].startswith("TLS") for x in gets),
                "h1: every %s call went on a connection opened ahead of its batch (%d of %d "
                "were a new connection's first request)" % (api, len(cold), len(gets)))
        if api != "dailymotion":  # one call a batch: its connections do not reach the cycle
            ended = [x for x in reqs[api] if x["nth"] == pf.tls_fixture.KEEPALIVE_REQUESTS]
            r.check(ended, "h1: %s ended connections during the run (keepalive_requests %d), "
                    "which were replaced" % (api, pf.tls_fixture.KEEPALIVE_REQUESTS))
        r.check(src[api]["breaker_opens"] == 0,
                "h1: %s's breaker never opened: %d" % (api, src[api]["breaker_opens"]))
        r.goal(share[api] >= GOAL, "h1: >= %.0f %% of %s's known ids enriched: %.2f %% (%d of %d)"
               % (100 * GOAL, api, 100 * share[api], tot[api][1], tot[api][0]))
        r.check(src[api]["warmups"] >= WORKERS,
                "h1: %s's connections warmed ahead of batches: %d" % (api, src[api]["warmups"]))
    r.check(not opened, "h1: no breaker transition logged: %s" % opened[:2])
    # The warm-ups: HEAD of the root, no key, no token; free of quota.
    logs = {api: prov.fakes[api].log() for api in pf.APIS}
    heads = [(api, e) for api in pf.APIS for e in logs[api] if e["method"] == "HEAD"]
    r.check(heads and all(e["path"] == "/" and e["query"] == "" and not e.get("authorization")
                          for _, e in heads),
            "h1: warm-ups are HEAD / without the key or the token: %s"
            % sorted(set((a, e["path"], e["query"][:20]) for a, e in heads))[:4])
    yt_calls = [e for e in logs["youtube"] if e["method"] == "GET"]
    used = prov.fakes["youtube"].stats()["settings"]["quota_used"] - q0
    budget = src["youtube"].get("budget", {})
    r.check(used == len(yt_calls) and budget.get("spent") == used,
            "h1: YouTube's quota: one unit a videos.list call, none for a warm-up, and the day's "
            "budget spent exactly that: fake %d units, %d calls, budget %s"
            % (used, len(yt_calls), budget.get("spent")))


def main():
    r = harness.Results()
    t0 = time.monotonic()
    only = sys.argv[1:]
    tests = [("h1", test_h1)]
    with pf.Providers(http2=False) as prov:
        for name, fn in tests:
            if not only or name in only:
                fn.__name__ = "test_" + name
                r.run(fn, prov)
    print("test_providers_h1: %.1f s" % (time.monotonic() - t0))
    r.done()


if __name__ == "__main__":
    main()
