"""report.py: the soak's report, written into --out.

Owns summary.txt (the figures, every check, the timeline of faults),
samples.csv, requests.csv and the SVG plots (svgplot.py draws them).
Invariant: it only reads what the run and the verdict recorded.
"""
import json
import os
import time

import svgplot


class ReportMixin:
    """The Soak methods that write the report."""

    def summary(self, v):
        """Writes summary.txt, the CSVs and the plots; 1 when a check failed."""
        a = self.args
        out, fails, res, cal = v["out"], v["fails"], v["res"], v["cal"]
        rin, rout, rdeg, tot, by_status = v["rin"], v["rout"], v["rdeg"], v["tot"], v["by_status"]
        lat = sorted(r["t1"] - r["t0"] for r in res if r["status"] == 200 and r["kind"] != "slow")

        def pct(p):
            return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0
        exits = {}
        for e in self.env.log_events("worker exit"):
            exits[e.get("reason")] = exits.get(e.get("reason"), 0) + 1
        kinds = {}
        for r in res:
            k = r["kind"].split(":")[0]
            kinds.setdefault(k, {}).setdefault(r["status"], 0)
            kinds[k][r["status"]] += 1
        head = ["enrichd soak: %.0f s, seed %d, %s" % (a.seconds, a.seed, time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                       time.gmtime())),
                "capacity (closed loop, 4 in flight) %.1f batches/s; bursts at %.1f/s" % (
                    self.capacity, 3 * self.capacity),
                "requests %d (+%d calibration): by status %s" % (len(res), len(cal), json.dumps(
                    {str(k): v for k, v in sorted(by_status.items())})),
                "by kind: %s" % json.dumps({k: {str(s): n for s, n in sorted(v.items())}
                                            for k, v in sorted(kinds.items())}),
                "200 latency ms p50 %.1f p90 %.1f p99 %.1f max %.1f" % (pct(0.5), pct(0.9), pct(0.99),
                                                                         pct(1.0)),
                "200 latency ms by kind (p50/p99/max): %s" % "; ".join(
                    "%s %s" % (k, lat_of(res, k)) for k in ("trace", "burst", "hostile", "slow")),
                "records in %d out %d degraded %d; enrichd counters %s" % (rin, rout, rdeg, json.dumps(tot)),
                "503 + Retry-After: %d shed by a worker (waited past queue_timeout_ms), %d refused by nginx "
                "(max_conns reached), %d lost with a worker's kill -9 (%d kills), %d lost with the master's "
                "SIGKILL (%d kills)" % (v["shed_worker"], v["refused"], v["lost_worker"], len(self.kills),
                                        v["lost_master"], len(self.master_kills)),
                "worker exits by reason: %s; kill -9: %d; master lives: %d" % (json.dumps(exits),
                                                                              len(self.kills),
                                                                              self.holder.lives),
                "listen queue max %d; pool RSS max %d kB; descriptors max %d" % (
                    max((s["queue"] for s in self.samples), default=0),
                    max((s["rss"] for s in self.samples), default=0),
                    max((s["fds"] for s in self.samples), default=0)),
                ""]
        self.plots(res, v["why_503"])
        with open(os.path.join(a.out, "samples.csv"), "w") as f:
            f.write("t,life,up,rss_kb,fds,listen_queue,shed_total,degraded_total\n")
            for x in self.samples:
                f.write("%.2f,%d,%d,%d,%d,%d,%d,%d\n" % (x["t"], x["life"], x["up"], x["rss"], x["fds"],
                                                         x["queue"], x["shed"], x["degraded"]))
        with open(os.path.join(a.out, "requests.csv"), "w") as f:
            f.write("request_id,kind,due_s,done_s,status,retry_after,degraded,error,503_by\n")
            for r in sorted(self.results, key=lambda r: r["t0"]):
                f.write("%s,%s,%.3f,%.3f,%d,%s,%d,%s,%s\n" % (
                    r["rid"], r["kind"], r["t0"], r["t1"], r["status"], r["retry_after"] or "", r["degraded"],
                    json.dumps(r["err"] or ""), v["why_503"].get(r["rid"], "") if r["status"] == 503 else ""))
        text = "\n".join(head + out + ["", "events:"] +
                         ["  %7.1f %s" % e for e in self.events] +
                         ["", "%s: %d checks, %d failed" % ("FAIL" if fails else "PASS", len(out), len(fails))])
        with open(os.path.join(a.out, "summary.txt"), "w") as f:
            f.write(text + "\n")
        print(text)
        return 1 if fails else 0

    def plots(self, res, why_503):
        """why_503: who answered each 503, by request id (the access log's
        word: "worker", "refused", "lost")."""
        d = self.args.out
        lat = [(r["t0"], (r["t1"] - r["t0"]) * 1000) for r in sorted(res, key=lambda r: r["t0"])
               if r["status"] == 200 and r["kind"] != "slow"]
        ref = [(r["t0"], (r["t1"] - r["t0"]) * 1000) for r in sorted(res, key=lambda r: r["t0"])
               if r["status"] not in (200,) and not r["err"]]
        s = self.samples
        svgplot.plot(os.path.join(d, "latency.svg"), "LATENCY MS", "SECONDS",
                     [("200", lat), ("OTHER", ref)], dots=True)
        svgplot.plot(os.path.join(d, "rss.svg"), "POOL RSS KB", "SECONDS", [("RSS", [(x["t"], x["rss"]) for x in s])])
        svgplot.plot(os.path.join(d, "fds.svg"), "POOL DESCRIPTORS", "SECONDS",
                     [("FDS", [(x["t"], x["fds"]) for x in s])])
        svgplot.plot(os.path.join(d, "queue.svg"), "LISTEN QUEUE", "SECONDS",
                     [("QUEUE", [(x["t"], x["queue"]) for x in s])])
        # A worker's shed and nginx's refusal apart: one says the pool's
        # queue waited too long, the other that max_conns held the door.
        series = [(name, self.per_second(res, lambda r, w=w: r["status"] == 503 and r["retry_after"]
                                         and why_503.get(r["rid"]) == w))
                  for name, w in (("WORKER SHED", "worker"), ("NGINX REFUSED", "refused"), ("LOST", "lost"))]
        # Degraded batches, not records: the same unit as the 503s, so a
        # few sheds stay visible beside hundreds of degraded records.
        deg = self.per_second(res, lambda r: r["degraded"] > 0)
        svgplot.plot(os.path.join(d, "shed_degraded.svg"), "BATCHES A SECOND: 503 AND DEGRADED", "SECONDS",
                     series + [("DEGRADED", deg)])

    @staticmethod
    def per_second(res, pred, weight=lambda r: 1):
        n = {}
        for r in res:
            if pred(r):
                n[int(r["t0"])] = n.get(int(r["t0"]), 0) + weight(r)
        if not res:
            return []
        end = int(max(r["t0"] for r in res)) + 1
        return [(t, n.get(t, 0)) for t in range(0, end)]


def lat_of(res, kind):
    v = sorted((r["t1"] - r["t0"]) * 1000 for r in res if r["status"] == 200 and r["kind"] == kind)
    if not v:
        return "-"
    return "%.0f/%.0f/%.0f" % (v[len(v) // 2], v[min(len(v) - 1, int(0.99 * len(v)))], v[-1])

