#!/usr/bin/env python3
"""test_provider_answers.py: the three APIs as they answer in December
2026, through the real stack (client -> nginx -> enrichd -> nginx as TLS
terminator -> each API's fake, tests/integration/providers_fixture.py).
What each reader makes of an answer is unit-tested (tests/unit/test_api.c);
this holds the daemon to it end to end.

  (a) larger thumbnails: YouTube lists fhd (1920), qhd (2560) and uhd
      (3840) for some videos, widths given or not: every known id's
      poster is the widest thumbnail (uhd for the "uhd" ids, listed first
      in their answer; qhd, fhd; by name when no width is given), its
      runtime the API's, nothing degraded
  (b) untrimmed: Vimeo ignores fields= and sends each video object whole
      (4.8 to 25 KB): batches of two full chunks of 50 are enriched,
      nothing degraded, no call refused as too large, though each answer
      is past what the call's cap once allowed (7 KiB an id)
  (c) live and upcoming broadcasts (YouTube's liveBroadcastContent,
      Dailymotion's mode "live"): their answers live cache_live_ttl_s (2 s
      here), the others their source's day: once it has passed, a batch
      asks each API again for its live and upcoming ids alone; their
      runtimes are the records' own, YouTube's posters the _live ones
"""
# Nothing here is a matter of time but cache_live_ttl_s, waited out with a
# margin from when the answers were stored; a batch's deadline is 1 s (what
# is checked is what is answered, not when).
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import providers_fixture as pf  # noqa: E402
import fake_providers as fp  # noqa: E402
from harness import degraded, post  # noqa: E402

WORKERS = 2
DEADLINE_MS = 1000  # what is checked is what is answered, not when
OLD_ITEM_CAP = 3 * 2048 + 1024  # the cap's share of an id before (upstream_reply.h)
OLD_SLACK = 16384
LIVE_TTL_S = 2


def start(prov, name, **over):
    over.setdefault("upstream_timeout_ms", DEADLINE_MS)
    return pf.start_env(prov, name, WORKERS, **over)


def yt_batch(tag, prefixes):
    """YouTube records, one per prefix (and one plain), each id new to tag."""
    return [{"provider": "yt", "id": "%s%s-%d" % (p, tag, i), "duration": 0}
            for i, p in enumerate(prefixes)]


def failures(env, kind):
    return sum(v for k, v in harness.metrics(env).items()
               if k.startswith("enrichd_upstream_failures_total") and 'kind="%s"' % kind in k)


def test_larger(r, prov):
    prov.reset()
    kinds = ["uhd", "qhd", "fhd", "nw", "nwuhd", "Yt", "uhd", "live", "upc", "unk"]
    recs = yt_batch("L", kinds * 4) + pf.mixed_batch("L", 60)
    with start(prov, "answers-larger") as env:
        st, h, lines = post(env, recs)
        res = pf.check_lines(recs, lines)
        r.check(st == 200 and res["enriched"] == res["known"] > 0,
                "larger: every known id carries the widest thumbnail and its runtime: %d of %d; "
                "wrong: %s" % (res["enriched"], res["known"], res["wrong"]))
        r.check(degraded(h) == 0, "larger: nothing degraded: %s" % h.get("x-enrich-degraded"))
        by = {}
        for rec, line in zip(recs, lines):
            if rec["provider"] == "yt" and line.get("poster", "").startswith("https://i.ytimg"):
                by.setdefault(rec["id"].split("L-")[0], set()).add(
                    line["poster"].rsplit("/", 1)[1])
        want = {"uhd": {"uhddefault.jpg"}, "qhd": {"qhddefault.jpg"}, "fhd": {"fhddefault.jpg"},
                "nwuhd": {"uhddefault.jpg"}}
        r.check(all(by.get(k) == v for k, v in want.items()),
                "larger: uhd over qhd over fhd over maxres, by width and, widths absent, by name: "
                "%s" % sorted(by.items()))
        r.check(by.get("nw", set()) <= {"hqdefault.jpg", "sddefault.jpg", "maxresdefault.jpg"} and
                by.get("nw"),
                "larger: no width given and no larger name: the best of the older names: %s"
                % by.get("nw"))


def test_untrimmed(r, prov):
    prov.reset()
    vm = prov.fakes["vimeo"]
    vm.control(vm_untrimmed=True)
    try:
        with start(prov, "answers-untrimmed") as env:
            total = known = enriched = 0
            for b in range(3):
                recs = [{"provider": "vm", "id": pf.new_id("vm", "U%d" % b, i), "duration": 0}
                        for i in range(100)] + pf.mixed_batch("U%d" % b, 40)
                st, h, lines = post(env, recs)
                res = pf.check_lines(recs, lines)
                total += 1
                known += res["known"]
                enriched += res["enriched"]
                r.check(st == 200 and res["enriched"] == res["known"] > 0 and degraded(h) == 0,
                        "untrimmed: batch %d enriched whole: %d of %d, degraded %s; wrong: %s"
                        % (b, res["enriched"], res["known"], h.get("x-enrich-degraded"),
                           res["wrong"][:2]))
            calls = vm.log()
            sizes = []
            for e in calls:
                ids = pf.asked_ids("vimeo", e)
                body = sum(len(fp._compact.encode(fp.vm_untrimmed(i)).replace("/", "\\/"))
                           for i in ids if fp.known(i))
                sizes.append((len(ids), body, OLD_SLACK + len(ids) * (OLD_ITEM_CAP + 6 * 10)))
            full = [s for s in sizes if s[0] == 50]
            r.check(len(full) >= 6 and all(b > old for _, b, old in full),
                    "untrimmed: full chunks of 50 whose answers pass the old cap: %s"
                    % [(n, b, old) for n, b, old in full][:4])
            r.check(failures(env, "too_large") == 0,
                    "untrimmed: no call refused as too large: %d" % failures(env, "too_large"))
    finally:
        vm.control(vm_untrimmed=False)


def test_live(r, prov):
    prov.reset()
    recs = (yt_batch("V", ["live", "upc", "Yt", "uhd", "live", "Yt", "upc", "fhd"] * 3) +
            [{"provider": "dm", "id": "%sxV%d" % (p, i), "duration": 0}
             for i, p in enumerate(["live", "", "upc", "", "live", ""] * 2)])
    apis = ("youtube", "dailymotion")
    with start(prov, "answers-live", cache_live_ttl_s=LIVE_TTL_S) as env:
        st, h, lines = post(env, recs)
        t1 = time.time()  # every answer stored by now: the live ones expire by t1 + LIVE_TTL_S
        res = pf.check_lines(recs, lines)
        r.check(st == 200 and res["enriched"] == res["known"] == len(recs),
                "live: every id enriched: %d of %d; wrong: %s" % (res["enriched"], res["known"],
                                                                  res["wrong"]))
        live = [(rec, line) for rec, line in zip(recs, lines)
                if rec["id"].startswith(("live", "upc"))]
        r.check(all(line["duration"] == 0 and (rec["provider"] != "yt" or
                                               line["poster"].endswith("_live.jpg"))
                    for rec, line in live),
                "live: no runtime (the record's own 0), YouTube's _live thumbnail: %s"
                % [line for _, line in live][:2])
        n0 = {api: len(prov.fakes[api].log()) for api in apis}
        # A batch within the lifetime: all from the cache (when this one
        # ended before the lifetime could have: a stalled run is not a
        # fault of the cache's).
        post(env, recs)
        within = time.time() < t1 + LIVE_TTL_S * 0.5
        more = {api: len(prov.fakes[api].log()) - n0[api] for api in apis}
        r.check(not any(more.values()) or not within, "live: within its lifetime, no call: %s"
                % more)
        harness.wait_for(lambda: time.time() > t1 + LIVE_TTL_S + 0.3, LIVE_TTL_S + 5,
                         what="the live answers' lifetime")
        n0 = {api: len(prov.fakes[api].log()) for api in apis}
        st, h, lines = post(env, recs)
        res = pf.check_lines(recs, lines)
        for api in apis:
            asked = sorted(i for e in prov.fakes[api].log()[n0[api]:]
                           for i in pf.asked_ids(api, e))
            want = sorted(set(rec["id"] for rec, _ in live if pf.API_OF[rec["provider"]] == api))
            r.check(asked == want, "live: past cache_live_ttl_s, %s asked again for its live "
                    "and upcoming ids alone: %d asked, %d live (others: %s)"
                    % (api, len(asked), len(want), sorted(set(asked) - set(want))[:3]))
        r.check(res["enriched"] == res["known"] == len(recs) and degraded(h) == 0,
                "live: the batch again enriched whole: %d of %d" % (res["enriched"],
                                                                    res["known"]))


def main():
    harness.run_tests(test_larger, test_untrimmed, test_live, fixture=pf.Providers)


if __name__ == "__main__":
    main()
