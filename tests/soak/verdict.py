"""verdict.py: the soak's checks, every one PASS or FAIL.

Owns the reference (build/enrich's answer for each body), the fit that
says whether the pool's RSS and descriptors are flat, and the checks:
every request answered, every answer build/enrich's, the pool flat, the
three ledgers (the client's, nginx's access log's, enrichd's counters
summed over every master's life) equal, every fault made, the watchdog
fed.  Invariant: a check compares independent counts; none is derived
from another ledger.
"""
import hashlib
import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from stack import SAMPLE_S, WATCHDOG_S, WORKERS, log, mval
from traffic import CONTRACT_4XX, PERIOD_S, digest, masked

# The reasons of the two 503s (snippets/enrichd-errors.conf, the worker's
# shed), so the client's ledger tells them apart without nginx's.
NGINX_503_REASON = b"enrichd is at capacity or unreachable"
WORKER_503_REASON = b"overloaded: waited"

# Flat: the fitted growth over the run at most this share of the median,
# or this absolute amount (small pools are noisy in relative terms).
# Descriptors: the upstream connections each worker may keep (4 here) come
# and go with the provider's faults, so the slack is two workers' worth.
FLAT_SHARE, FLAT_RSS_KB, FLAT_FDS = 0.10, 6 * 1024, 2 * 4 + 4
# Samples before this are the pool warming up (the host's upstream cache
# filling to cache_entries, connections opening).
WARM_SHARE, WARM_MIN_S = 0.15, 12.0
FLAT_WINDOW_S = 10.0
FLAT_MIN_PERIODS = 4


# ---- the reference ---------------------------------------------------------
class Reference:
    """build/enrich's verdict on a body: (200, masked digest, records in,
    records out) or (4xx, None, 0, 0); one run per distinct body."""

    def __init__(self, enrich):
        self.enrich, self.memo = enrich, {}

    def get(self, body):
        k = hashlib.sha1(body).digest()
        if k not in self.memo:
            p = subprocess.run([self.enrich], input=body, capture_output=True, timeout=60)
            if p.returncode == 0:
                lines = p.stdout.count(b"\n") if p.stdout != b"\n" else 0
                self.memo[k] = (200, digest(masked(p.stdout)), elements(body), lines)
            else:
                self.memo[k] = (400, None, 0, 0)
        return self.memo[k]


def elements(body):
    """The number of top-level array elements of a body the engine
    accepts (-1 when Python's reader disagrees: the ledger then shows it)."""
    text = body.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return len(json.loads(text))
    except (ValueError, RecursionError):
        return -1


def window_medians(points):
    """[(group, x, y)] -> the median y of each FLAT_WINDOW_S window of a
    group, at the window's middle."""
    win = {}
    for g, x, y in points:
        win.setdefault((g, int(x // FLAT_WINDOW_S)), []).append(y)
    out = []
    for (g, w), ys in sorted(win.items()):
        if len(ys) >= FLAT_WINDOW_S / SAMPLE_S / 2:  # a window mostly covered
            out.append((g, (w + 0.5) * FLAT_WINDOW_S, sorted(ys)[len(ys) // 2]))
    return out


def slope(points):
    """Least-squares slope of [(group, x, y)] within groups (each group its
    own offset)."""
    groups = {}
    for g, x, y in points:
        groups.setdefault(g, []).append((x, y))
    sxy = sxx = 0.0
    for pts in groups.values():
        if len(pts) < 2:
            continue
        mx = sum(p[0] for p in pts) / len(pts)
        my = sum(p[1] for p in pts) / len(pts)
        sxx += sum((p[0] - mx) ** 2 for p in pts)
        sxy += sum((p[0] - mx) * (p[1] - my) for p in pts)
    return sxy / sxx if sxx else 0.0


def nginx_502s(api):
    """nginx's own 502s in the access log, as (refused, lost): with no
    upstream connect time nginx made no connection (max_conns reached, the
    backlog full); with one, a worker had the request and died with it."""
    e = [x for x in api if x.get("upstream_status") == "502"]
    lost = [x for x in e if x.get("upstream_connect_time") not in ("", "-")]
    return [x for x in e if x not in lost], lost


def why_503(api):
    """{request id: "worker" | "refused" | "lost"} of every 503 nginx logged."""
    refused, lost = nginx_502s(api)
    out = {x["request_id"]: "worker" for x in api if int(x["status"]) == 503
           and x.get("upstream_status") == "503"}
    out.update((x["request_id"], "refused") for x in refused)
    out.update((x["request_id"], "lost") for x in lost)
    return out


def answer_503(r):
    """Who answered a client's 503 + Retry-After, by its JSON reason:
    "worker" (a shed), "nginx" (its own) or None."""
    if r["err"] or r["status"] != 503 or not r["retry_after"]:
        return None
    body = r.get("errbody") or b""
    if NGINX_503_REASON in body:
        return "nginx"
    return "worker" if WORKER_503_REASON in body else None


class VerdictMixin:
    """The Soak method that judges the run (soak.py holds the state)."""

    def _judge_answered(self, check, res):
        """1: every request has an answer the contract allows."""
        # 1. every request answered
        # No 502 passes: nginx answers every 502 of its own (max_conns
        # reached, no connection, a worker or the master killed with the
        # request) as 503 with Retry-After (snippets/enrichd-errors.conf),
        # so a 502 here is that rule broken.
        bad = []
        for r in res:
            st = r["status"]
            if r["err"]:
                bad.append(r)
            elif st == 200 or st in CONTRACT_4XX or (st == 503 and r["retry_after"]):
                continue
            else:
                bad.append(r)
        check(not bad, "every request answered (200, contract 4xx, 503+Retry-After): %d of %d not: %s"
              % (len(bad), len(res), "; ".join("%s %s st=%s err=%s %r" % (r["rid"], r["kind"], r["status"],
                                                r["err"], r.get("errbody", b"")[:120]) for r in bad[:8])))


    def _judge_reference(self, check, res, ref):
        """2: every answer is build/enrich's for the same body."""
        # 2. the answer is build/enrich's
        wrong, incomplete = [], []
        for r in res:
            if r["body"] is None or r["err"]:
                continue
            rst, rdig, _, _ = ref.get(r["body"])
            if r["status"] == 200:
                if not r.get("complete"):
                    incomplete.append(r)
                if rst != 200 or r["digest"] != rdig:
                    wrong.append(r)
            elif r["status"] in CONTRACT_4XX and rst == 200:
                wrong.append(r)
        check(not incomplete, "every 200 complete (ends in LF): %d not" % len(incomplete))
        check(not wrong, "every answer build/enrich's (status; 200s byte-exact, poster/duration/fetched_at "
              "masked): %d differ: %s" % (len(wrong), "; ".join("%s %s st=%s ref=%s" % (
                  r["rid"], r["kind"], r["status"], ref.get(r["body"])[0]) for r in wrong[:8])))


    def _judge_flat(self, check, out, a):
        """3: the pool's RSS and descriptors do not grow over the run."""
        # 3. flat RSS and descriptors
        live = [s for s in self.samples if s["up"] and s["rss"]]
        # Every period replays the same faults and ends with the master's
        # death (a new pool), and every other pool runs the leak shim: so
        # the pool at a given phase of the schedule, with or without the
        # shim, is compared with itself a period later.  The slope is
        # fitted to FLAT_WINDOW_S window medians, each (shim, phase window)
        # its own offset; a growth that survives only within a phase, or a
        # saw-tooth of recycling, is no trend.
        periods_run = int(max((s["t"] for s in live), default=0) // PERIOD_S)
        cut = [s for s in live if s["t"] >= max(WARM_SHARE * a.seconds, WARM_MIN_S)]
        for key, absmax, unit in (("rss", FLAT_RSS_KB, "kB"), ("fds", FLAT_FDS, "fds")):
            pts = window_medians([((s["life"] % 2, int((s["t"] % PERIOD_S) // FLAT_WINDOW_S)), s["t"], s[key])
                                  for s in cut])
            k = slope(pts)
            med = sorted(p[2] for p in pts)[len(pts) // 2] if pts else 0
            growth = k * (a.seconds - cut[0]["t"] if cut else 0)
            what = ("pool %s flat: fitted slope %.4f %s/s, %.0f %s over the run (median %d, limit %.0f), "
                    "%d windows of %.0f s" % (key, k, unit, growth, unit, med, max(FLAT_SHARE * med, absmax),
                                              len(pts), FLAT_WINDOW_S))
            if periods_run < FLAT_MIN_PERIODS:
                out.append("NOTE %s: not judged, %d periods (at least %d: each phase with and without the "
                           "leak shim twice)" % (what, periods_run, FLAT_MIN_PERIODS))
            else:
                check(growth <= max(FLAT_SHARE * med, absmax), what)


    def _judge_access_log(self, check, out, allres):
        """4, first ledger pair: the client's requests and nginx's access log, one for one;
        the API's access log lines and the client's requests by id, returned."""
        # 4. the three ledgers
        access = []
        with open(self.env.access_log) as f:
            for line in f:
                try:
                    access.append(json.loads(line))
                except ValueError:
                    out.append("WARN unparsable access log line: %r" % line[:200])
        api = [x for x in access if x.get("request_id", "").startswith("soak-")]
        acc = {x["request_id"]: x for x in api}
        cli = {r["rid"]: r for r in allres}
        answered = {k: r for k, r in cli.items() if not r["err"]}
        miss = [k for k in answered if k not in acc]
        extra = [k for k in acc if k not in cli]
        check(not miss and not extra and len(api) == len(acc),
              "client and access log: the same requests (%d client, %d logged, %d missing, %d extra, "
              "%d duplicate)" % (len(answered), len(api), len(miss), len(extra), len(api) - len(acc)))
        diff = [k for k, r in answered.items() if k in acc and acc[k]["status"] != r["status"]]
        check(not diff, "client and access log: the same status for each (%d differ: %s)" % (
            len(diff), ", ".join("%s %s/%s" % (k, answered[k]["status"], acc[k]["status"]) for k in diff[:8])))
        ddiff = [k for k, r in answered.items() if k in acc and int(acc[k].get("degraded") or 0) != r["degraded"]]
        check(not ddiff, "client and access log: the same degraded count for each (%d differ)" % len(ddiff))
        return api, cli


    def _sum_counters(self, check):
        """enrichd's counters, summed over every master's life (each read last in its life)."""
        # enrichd's counters, summed over the masters' lives
        tot = {}
        names = ("enrichd_requests_accepted_total", "enrichd_requests_completed_total", "enrichd_requests_lost_total",
                 "enrichd_records_in_total", "enrichd_records_out_total", "enrichd_records_rejected_total",
                 "enrichd_records_degraded_total", "enrichd_shed_total")
        for m in self.final:
            m = m or {}
            for nm in names:
                tot[nm] = tot.get(nm, 0) + mval(m, nm)
            for c in ("2xx", "4xx", "5xx"):
                k = 'enrichd_responses_total{code="%s"}' % c
                tot[k] = tot.get(k, 0) + m.get(k, 0)
        check(all(m for m in self.final), "a final /metrics read from each of %d master lives" % len(self.final))
        return tot


    def _judge_by_class(self, check, out, api, cli, tot):
        """The answers enrichd gave, by status class, in all three ledgers; nginx's 502s and 504s
        and the client's classes returned for the checks after."""
        # What enrichd answered: nginx logged an upstream status of its own.
        by_enrichd = [x for x in api if x.get("upstream_status") not in ("", "-", "502", "504")]
        refused_log, lost_log = nginx_502s(api)
        gave_up = [x for x in api if x.get("upstream_status") == "504"]
        out.append("NOTE nginx: %d 502 where it made no connection (max_conns reached, backlog full), %d 502 "
                   "from a worker that died with the request, %d 504 (fastcgi_read_timeout: nginx gave up, "
                   "the request stayed queued)" % (len(refused_log), len(lost_log), len(gave_up)))
        cls = {"2xx": 0, "4xx": 0, "5xx": 0}
        for x in by_enrichd:
            cls["%dxx" % (int(x["status"]) // 100)] = cls.get("%dxx" % (int(x["status"]) // 100), 0) + 1
        cli_cls = {"2xx": 0, "4xx": 0, "5xx": 0}
        for x in by_enrichd:
            r = cli.get(x["request_id"])
            if r and not r["err"]:
                cli_cls["%dxx" % (r["status"] // 100)] = cli_cls.get("%dxx" % (r["status"] // 100), 0) + 1
        for c in ("2xx", "4xx", "5xx"):
            e = tot.get('enrichd_responses_total{code="%s"}' % c, 0)
            check(cli_cls[c] == cls[c] == e, "ledgers agree on %s answered by enrichd: client %d, nginx %d, "
                  "enrichd %d" % (c, cli_cls[c], cls[c], e))
        check(len(by_enrichd) == tot.get("enrichd_requests_completed_total"),
              "ledgers agree on requests enrichd completed: nginx %d, enrichd %d" % (
                  len(by_enrichd), tot.get("enrichd_requests_completed_total", 0)))
        return refused_log, lost_log, gave_up, cli_cls


    def _judge_lost(self, check, cli, lost_log, tot):
        """Requests lost with a killed worker or master, in all three ledgers."""
        # Lost: a request nginx had passed to a worker that died with it.
        # The client saw nginx's 503 + Retry-After, while a kill was made;
        # enrichd counts a killed worker's (enrichd_requests_lost_total,
        # by the master that saw it die) and, for the master's death, what
        # its workers held when it was frozen for its last counters.
        kills = [(t, "master") for t, _ in self.master_kills] + [(t, "worker") for t, _ in self.kills]
        lost = {"master": [], "worker": [], "unexplained": []}
        for x in lost_log:
            r = cli.get(x["request_id"])
            ok = r is not None and not r["err"] and r["status"] == 503 and r["retry_after"]
            at = [k for kt, k in kills if ok and r["t0"] <= kt <= r["t1"]]
            lost["master" if "master" in at else "worker" if at else "unexplained"].append(x)
        held = sum(h for _, h in self.master_kills)
        check(not lost["unexplained"], "every request nginx lost with a worker answered 503 + Retry-After and "
              "in flight at a kill: %d not: %s" % (len(lost["unexplained"]), ", ".join(
                  x["request_id"] for x in lost["unexplained"][:8])))
        check(len(lost["worker"]) == tot.get("enrichd_requests_lost_total") and len(lost["worker"]) <= len(self.kills),
              "ledgers agree on requests lost with a worker's kill -9: client and nginx %d, enrichd %d "
              "(%d kills, at most one each)" % (len(lost["worker"]), tot.get("enrichd_requests_lost_total", 0),
                                                len(self.kills)))
        check(len(lost["master"]) == held and all(h <= WORKERS for _, h in self.master_kills),
              "ledgers agree on requests lost with the master's SIGKILL under traffic: client and nginx %d, "
              "enrichd %d in flight when it died (%d kills: %s)" % (
                  len(lost["master"]), held, len(self.master_kills),
                  " ".join(str(h) for _, h in self.master_kills)))
        acc_t = tot.get("enrichd_requests_accepted_total", 0)
        check(acc_t == tot.get("enrichd_requests_completed_total", 0) + tot.get("enrichd_requests_lost_total", 0)
              + held, "enrichd's own ledger: accepted %d = completed + lost with a worker + lost with the master"
              % acc_t)
        return lost, held


    def _judge_records(self, check, out, ref, allres, api, cli, tot, gave_up, cli_cls):
        """Records in, out, rejected and degraded, in all three ledgers."""
        ok200 = [r for r in allres if r["status"] == 200 and not r["err"] and r["body"] is not None]
        rin = sum(ref.get(r["body"])[2] for r in ok200)
        rout = sum(r.get("lines", 0) for r in ok200)
        rdeg = sum(r["degraded"] for r in allres if not r["err"])
        ndeg = sum(int(x.get("degraded") or 0) for x in api)
        if gave_up:
            late = [r for x in gave_up for r in [cli.get(x["request_id"])] if r and r["body"] is not None]
            lin = sum(ref.get(r["body"])[2] for r in late)
            lout = sum(ref.get(r["body"])[3] for r in late if ref.get(r["body"])[0] == 200)
            out.append("NOTE the %d requests nginx gave up on (504) hold %d records in, %d out; enrichd "
                       "counts %d records in and %d out more than the client received, %d 4xx more"
                       % (len(gave_up), lin, lout, tot.get("enrichd_records_in_total", 0) - rin,
                          tot.get("enrichd_records_out_total", 0) - rout,
                          tot.get('enrichd_responses_total{code="4xx"}', 0) - cli_cls["4xx"]))
        check(rin == tot.get("enrichd_records_in_total"), "ledgers agree on records in: client %d, enrichd %d"
              % (rin, tot.get("enrichd_records_in_total", 0)))
        check(rout == tot.get("enrichd_records_out_total"), "ledgers agree on records out: client %d, enrichd %d"
              % (rout, tot.get("enrichd_records_out_total", 0)))
        check(rin - rout == tot.get("enrichd_records_rejected_total"),
              "ledgers agree on records rejected: client %d, enrichd %d"
              % (rin - rout, tot.get("enrichd_records_rejected_total", 0)))
        check(rdeg == ndeg == tot.get("enrichd_records_degraded_total"),
              "ledgers agree on records degraded: client %d, nginx %d, enrichd %d"
              % (rdeg, ndeg, tot.get("enrichd_records_degraded_total", 0)))
        return rin, rout, rdeg


    def _judge_503s(self, check, allres, api, tot, refused_log, lost_log):
        """Every 503, by who answered it, in all three ledgers."""
        # Every 503 carries Retry-After, and comes from one of two places
        # each ledger tells apart: a worker's shed (its JSON reason; nginx
        # logs the upstream's 503) or nginx's own (its JSON reason; nginx
        # logs its 502: refused at max_conns, or lost with a worker).
        shed_c = sum(1 for r in allres if r["status"] == 503 and r["retry_after"])
        shed_n = sum(1 for x in api if int(x["status"]) == 503)
        check(shed_c == shed_n, "ledgers agree on 503 + Retry-After: client %d, nginx %d" % (shed_c, shed_n))
        cw = sum(1 for r in allres if answer_503(r) == "worker")
        cn = sum(1 for r in allres if answer_503(r) == "nginx")
        shed_w = sum(1 for x in api if int(x["status"]) == 503 and x.get("upstream_status") == "503")
        nginx_503 = sum(1 for x in refused_log + lost_log if int(x["status"]) == 503)
        check(cw == shed_w and (tot.get("enrichd_shed_total") == shed_w
                                or not any("enrichd_shed_total" in k for m in self.final if m for k in m)),
              "ledgers agree on 503s shed by a worker: client %d, nginx %d, enrichd %d"
              % (cw, shed_w, tot.get("enrichd_shed_total", 0)))
        check(cn == nginx_503 == len(refused_log) + len(lost_log) and cw + cn == shed_c,
              "ledgers agree on nginx's own 503s: client %d, nginx %d (%d refused at max_conns or without a "
              "connection, %d lost with a killed worker or master)"
              % (cn, nginx_503, len(refused_log), len(lost_log)))
        return shed_w


    def _judge_faults(self, check, out, a):
        """5: every scheduled fault made, reloads taken or refused, the watchdog fed."""
        # 5. the faults happened
        check(not self.fault_errors, "every scheduled fault made: %r" % self.fault_errors)
        check(all(x is not None and x < 5 for x in self.ready_s),
              "each master ready within 5 s of its start: %s" % ", ".join(
                  "%.2f" % x if x is not None else "never" for x in self.ready_s))
        periods = max(1, int(a.seconds // PERIOD_S))
        out.append("NOTE refused reloads (invalid configuration) counted in enrichd_reload_failures_total: "
                   "%d of %d (the metric counts only new workers that did not start)"
                   % (self.refused_counted, self.reloads["bad"]))
        check(self.reloads["good"] == periods and self.reloads["bad"] == periods,
              "HUP: %d of %d good configurations taken, %d of %d bad ones refused" % (
                  self.reloads["good"], periods, self.reloads["bad"], periods))

        # systemd's watchdog: would it have restarted the service?
        gaps = self.holder.watchdog_gaps(time.monotonic())
        check(not gaps, "WATCHDOG=1 never withheld past WatchdogSec=%.0f s (systemd would have restarted "
              "enrichd %d times: %s)" % (WATCHDOG_S, len(gaps), ", ".join(
                  "at %.0f s for %.1f s" % (t - self.t0, d) for t, d in gaps)))


    def verdict(self, ref):
        """Every check of the run, as {"out": lines, "fails": [...]} with
        the figures the summary repeats."""
        a = self.args
        out = []
        fails = []

        def check(cond, what):
            out.append(("PASS " if cond else "FAIL ") + what)
            if not cond:
                fails.append(what)
            return cond

        t = time.monotonic()
        with ThreadPoolExecutor(2) as ex:  # build/enrich on every body not yet seen
            list(ex.map(ref.get, {r["body"] for r in self.results if r["body"] is not None}))
        log("reference answers: %d bodies, %.1f s" % (len(ref.memo), time.monotonic() - t))
        res = [r for r in self.results if r["kind"] != "calibrate"]
        cal = [r for r in self.results if r["kind"] == "calibrate"]
        allres = self.results
        by_status = {}
        for r in res:
            by_status[r["status"]] = by_status.get(r["status"], 0) + 1

        self._judge_answered(check, res)
        self._judge_reference(check, res, ref)
        self._judge_flat(check, out, a)
        api, cli = self._judge_access_log(check, out, allres)
        tot = self._sum_counters(check)
        refused_log, lost_log, gave_up, cli_cls = self._judge_by_class(check, out, api, cli, tot)
        lost, held = self._judge_lost(check, cli, lost_log, tot)
        rin, rout, rdeg = self._judge_records(check, out, ref, allres, api, cli, tot, gave_up, cli_cls)
        shed_w = self._judge_503s(check, allres, api, tot, refused_log, lost_log)
        self._judge_faults(check, out, a)
        return {"out": out, "fails": fails, "res": res, "cal": cal, "by_status": by_status,
                "rin": rin, "rout": rout, "rdeg": rdeg, "tot": tot, "held": held,
                "lost_worker": len(lost["worker"]), "lost_master": len(lost["master"]),
                "shed_worker": shed_w, "refused": len(refused_log), "why_503": why_503(api)}
