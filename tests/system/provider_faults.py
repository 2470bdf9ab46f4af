#!/usr/bin/env python3
"""provider_faults.py DIR KEY=VALUE...: the verdicts of run.sh's "provider
down, then slow" section, from what its two loops in the container wrote.

DIR holds:
  phases   "NAME START" per line (realtime seconds): baseline, down-500,
           down-closed, slow, restored, end;
  samples  one per ~1 s: "T <TAB> systemctl show's Key=Value lines joined
           by spaces <TAB> /healthz's body <TAB> its HTTP status";
  clients  one per batch: "T I STATUS SECONDS xDEGRADED" (DEGRADED is the
           X-Enrich-Degraded header, empty when absent: none degraded).
  provider the stand-in's access log: "END STATUS SECONDS METHOD" per call.
KEY=VALUE: nrestarts, mainpid (the service's before the section),
watchdog_s (WatchdogSec), window_s (health_window_s), records (per batch),
request_timeout_ms, grace_s (how long a phase's verdict may take to turn).

Prints one line per figure: "0 <TAB> text" passed, "1 <TAB> text" failed,
"- <TAB> text" information; run.sh counts them with its own ok/bad.  Every
check can fail: each reads what the daemon and systemd answered."""
import json
import sys

# The reasons a provider's fault may give (ops/health.c); any other one,
# or none, while the provider is down or slow is a failure.
PROVIDER_REASONS = {"degraded_ratio", "p99_latency", "breaker_open"}
RECOVERY_MARGIN_S = 2.0   # the verdict's cadence and the sampler's, past the window
CLIENT_MARGIN_MS = 1000   # nginx, curl and a loaded VM, past request_timeout_ms
SWITCH_S = 1.0            # a batch in flight when the provider's mode changed
LATE_S = 0.14             # a call past upstream_timeout_ms (150), seen from nginx
SLOW_BODY = 13 + 4096 + 1  # the slow mode's padded reply, whole (run.sh)
WATCHDOG_MAX_SHARE = 0.75  # largest gap between pings allowed, of WatchdogSec
PING_COUNT_SHARE = 0.8    # pings seen, of those due at WatchdogSec/2

out = []


def emit(cond, text):
    out.append(("0" if cond else "1") + "\t" + text)


def info(text):
    out.append("-\t" + text)


def read_phases(path):
    ph = []
    with open(path) as f:
        for line in f:
            name, t = line.split()
            ph.append((name, float(t)))
    return ph


def phase_of(ph, t):
    name = None
    for n, start in ph:
        if t >= start:
            name = n
    return name


def phase_start(ph, name):
    return dict(ph)[name]


def read_samples(path):
    s = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                s.append({"t": float(parts[0]), "bad": line.strip()})
                continue
            props = dict(kv.split("=", 1) for kv in parts[1].split() if "=" in kv)
            try:
                doc = json.loads(parts[2])
            except ValueError:
                doc = {"unparsed": parts[2][:80]}
            s.append({"t": float(parts[0]), "props": props, "doc": doc, "code": parts[3]})
    return s


def read_clients(path):
    c = []
    with open(path) as f:
        for line in f:
            p = line.split()
            # A 200 without the header has no record degraded (httpapi.c);
            # anything else unreadable counts as None, never as whole.
            deg = p[4][1:] if len(p) > 4 and p[4].startswith("x") else None
            n = int(deg) if deg and deg.isdigit() else 0 if deg == "" and p[2] == "200" else None
            c.append({"t": float(p[0]), "i": int(p[1]), "code": p[2],
                      "ms": float(p[3]) * 1000, "degraded": n})
    c.sort(key=lambda x: x["t"])
    return c


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else -1


def check_restarts(a, samples, span, t_down, t_slow, t_rest):
    """No restart: the same main process, no restart counted, all along."""
    nr = sorted(set(x["props"].get("NRestarts") for x in samples))
    mp = sorted(set(x["props"].get("MainPID") for x in samples))
    emit(nr == [a["nrestarts"]] and mp == [a["mainpid"]],
         "provider down %.0f s then slow %.0f s: zero restarts: NRestarts %s and MainPID %s in "
         "all %d samples over %.0f s (before: %s, %s)"
         % (t_slow - t_down, t_rest - t_slow, "/".join(map(str, nr)), "/".join(map(str, mp)),
            len(samples), span, a["nrestarts"], a["mainpid"]))


def check_health(ph, samples, t_down, t_rest, grace_s, window_s):
    """/healthz through the section: ok, then 503 with a provider's reason, live all along."""
    # Healthy to begin with.
    base = [x for x in samples if x["t"] < t_down]
    emit(base and all(x["code"] == "200" for x in base),
         "baseline, the stand-in answering every call: /healthz %s in %d samples"
         % ("/".join(sorted(set(x["code"] for x in base))), len(base)))

    # /healthz 503 with a provider's reason from a few seconds in to the
    # restore, every sample; live all along.
    fault = [x for x in samples if t_down <= x["t"] < t_rest]
    first = next((x for x in fault if x["code"] == "503"), None)
    turn = first["t"] - t_down if first else -1
    emit(first is not None and turn <= grace_s,
         "/healthz turned 503 %.1f s after the provider went down (health_window_s %g, "
         "allowed %g s)" % (turn, window_s, grace_s))
    held = [x for x in fault if first is not None and x["t"] >= first["t"]]
    wrong = [x for x in held
             if x["code"] != "503" or not x["doc"].get("reason")
             or not PROVIDER_REASONS & set(x["doc"].get("reasons", []))]
    emit(held and not wrong,
         "/healthz 503 with the provider's reason in every sample from then to the restore: "
         "%d of %d (%.0f s)%s" % (len(held) - len(wrong), len(held),
                                  held[-1]["t"] - held[0]["t"] if held else 0,
                                  "; wrong: %r" % [(round(x["t"] - t_down, 1), x["code"],
                                                    x["doc"].get("reason")) for x in wrong[:3]]
                                  if wrong else ""))
    for name in ("down-500", "down-closed", "slow"):
        start = phase_start(ph, name)
        stop = min(t for n, t in ph if t > start)
        mine = [x for x in samples if start + grace_s <= x["t"] < stop]
        ok = [x for x in mine if x["code"] == "503"
              and PROVIDER_REASONS & set(x["doc"].get("reasons", []))]
        kinds = sorted(set(r for x in mine for r in x["doc"].get("reasons", [])))
        emit(mine and len(ok) == len(mine),
             "%s (%.0f s): /healthz 503 in %d of %d samples past its first %g s, reasons %s"
             % (name, stop - start, len(ok), len(mine), grace_s, ",".join(kinds)))
        said = [x["doc"].get("reason", "") for x in mine]
        if said:
            info("%s: /healthz said \"%s\" ... \"%s\"" % (name, said[0], said[-1]))
    dead = [x for x in samples if x["doc"].get("live") is not True]
    emit(not dead, "live (the watchdog's verdict) in every sample: %d not live %r"
         % (len(dead), [x["doc"].get("live_reason") for x in dead[:2]]))


def check_watchdog(samples, span, wd_s):
    """WATCHDOG=1 on schedule: systemd's own stamp of the last one it got."""
    stamps = []
    for x in samples:
        v = int(x["props"].get("WatchdogTimestampMonotonic", "0") or 0)
        if v and (not stamps or v != stamps[-1][0]):
            stamps.append((v, x["t"]))
    gaps = [(b[0] - a_[0]) / 1e6 for a_, b in zip(stamps, stamps[1:])]
    # The last ping's age at the end, in the samples' time (the stamps are
    # CLOCK_MONOTONIC, the samples' realtime: the age is bounded from above
    # by the sampling step).
    tail = samples[-1]["t"] - stamps[-1][1] if stamps else span
    due = span / (wd_s / 2)
    emit(len(gaps) >= 2 and max(gaps) <= WATCHDOG_MAX_SHARE * wd_s and tail <= WATCHDOG_MAX_SHARE * wd_s
         and len(stamps) >= PING_COUNT_SHARE * due,
         "WATCHDOG=1 on schedule: %d pings seen in %.0f s (%.0f due at WatchdogSec/2), gaps "
         "between them %.2f-%.2f s (WatchdogSec %g, allowed %.1f), the last %.1f s before the end"
         % (len(stamps), span, due, min(gaps) if gaps else -1, max(gaps) if gaps else -1,
            wd_s, WATCHDOG_MAX_SHARE * wd_s, tail))


def check_batches(a, ph, clients, t_down, t_rest, records):
    """Every batch answered 200 within its deadline, degraded while the
    provider is faulty, whole when it is well; the times the provider's
    mode changed, returned."""
    limit = int(a["request_timeout_ms"]) + CLIENT_MARGIN_MS
    codes = sorted(set(c["code"] for c in clients))
    slow = max((c["ms"] for c in clients), default=-1)
    emit(clients and codes == ["200"] and slow <= limit,
         "%d batches, one every ~0.5 s: statuses %s, slowest %.0f ms (allowed %d: "
         "request_timeout_ms + %d)" % (len(clients), "/".join(codes), slow, limit, CLIENT_MARGIN_MS))
    for name in ("baseline", "down-500", "down-closed", "slow", "restored"):
        mine = [c for c in clients if phase_of(ph, c["t"]) == name]
        ms = [c["ms"] for c in mine]
        deg = sum(c["degraded"] or 0 for c in mine)
        info("%s: %d batches, p50 %.0f ms, max %.0f ms, degraded records %d of %d"
             % (name, len(mine), pct(ms, 0.5), max(ms, default=-1), deg, records * len(mine)))
    base_c = [c for c in clients if c["t"] < t_down]
    emit(base_c and all(c["degraded"] == 0 for c in base_c),
         "baseline: no record degraded in %d batches" % len(base_c))
    switches = [t for n, t in ph if n in ("down-500", "down-closed", "slow")]
    fault_c = [c for c in clients if t_down <= c["t"] < t_rest
               and not any(s <= c["t"] < s + SWITCH_S for s in switches)]
    whole = [c for c in fault_c if c["degraded"] != records]
    emit(fault_c and not whole,
         "provider down or slow: every record of %d batches degraded (X-Enrich-Degraded %d), "
         "%d not" % (len(fault_c), records, len(whole)))
    return switches


def check_provider_calls(d, ph, switches, t_rest):
    """The faults were real: what the stand-in's log says it answered.  The
    workers' HEADs (warming a connection) are answered at once in every
    mode; the calls are the GETs.  A GET "late" took past what
    upstream_timeout_ms (150) lets a call take: nginx logs the call it
    was still trickling when the worker gave it up."""
    calls = {}
    with open(d + "/provider") as f:
        for line in f:
            end, status, secs, method, sent = line.split()
            start = float(end) - float(secs)
            if any(s_ <= start < s_ + SWITCH_S for s_ in switches + [t_rest]):
                continue
            calls.setdefault(phase_of(ph, start), []).append((status, float(secs), method,
                                                              int(sent)))
    for name in ("baseline", "down-500", "down-closed", "slow", "restored"):
        mine = calls.get(name, [])
        gets = [c for c in mine if c[2] == "GET"]
        info("provider, %s: %d GETs, statuses %s, took p50 %.3f s, max %.3f s; %d HEADs"
             % (name, len(gets), "/".join(sorted(set(c[0] for c in gets))) or "-",
                pct([c[1] for c in gets], 0.5), max((c[1] for c in gets), default=-1),
                len(mine) - len(gets)))
    c500, cclosed, cslow = (calls.get(n, []) for n in ("down-500", "down-closed", "slow"))
    gslow = [c for c in cslow if c[2] == "GET"]
    # Slow for real: the stand-in was seen holding calls past enrichd's
    # timeout, and none of them got its whole reply (each given up).  Not
    # "every call late": a call's own start in nginx may come well into
    # enrichd's deadline on a loaded machine (one was cut at < 0.14 s).
    late = [c for c in gslow if c[1] >= LATE_S]
    whole = [c for c in gslow if c[3] >= SLOW_BODY]
    emit(c500 and all(c[0] == "500" for c in c500) and not cclosed and late and not whole,
         "the faults were real: %d calls answered 500 (of %d), %d while the port was closed, "
         "%d of %d GETs in the slow phase late (>= %.2f s), %d given their whole reply"
         % (sum(c[0] == "500" for c in c500), len(c500), len(cclosed), len(late), len(gslow),
            LATE_S, len(whole)))


def main():
    d = sys.argv[1]
    a = dict(kv.split("=", 1) for kv in sys.argv[2:])
    wd_s, window_s = float(a["watchdog_s"]), float(a["window_s"])
    grace_s, records = float(a["grace_s"]), int(a["records"])
    ph = read_phases(d + "/phases")
    samples = read_samples(d + "/samples")
    clients = read_clients(d + "/clients")
    t_down, t_slow = phase_start(ph, "down-500"), phase_start(ph, "slow")
    t_rest, t_end = phase_start(ph, "restored"), phase_start(ph, "end")

    broken = [x["bad"] for x in samples if "bad" in x]
    emit(samples and not broken, "%d samples of systemctl show and /healthz, %d unreadable %s"
         % (len(samples), len(broken), broken[:2]))
    samples = [x for x in samples if "bad" not in x]
    if not samples:
        print("\n".join(out))
        return
    span = samples[-1]["t"] - samples[0]["t"]
    steps = [b["t"] - a_["t"] for a_, b in zip(samples, samples[1:])]
    info("sampled over %.1f s, every %.2f s (largest step %.2f s)"
         % (span, span / max(1, len(steps)), max(steps) if steps else 0))

    check_restarts(a, samples, span, t_down, t_slow, t_rest)
    check_health(ph, samples, t_down, t_rest, grace_s, window_s)
    check_watchdog(samples, span, wd_s)
    switches = check_batches(a, ph, clients, t_down, t_rest, records)
    check_provider_calls(d, ph, switches, t_rest)

    # Back to healthy within the window once the provider is well.
    back = next((x for x in samples if x["t"] >= t_rest and x["code"] == "200"), None)
    rec = back["t"] - t_rest if back else -1
    emit(back is not None and rec <= window_s + RECOVERY_MARGIN_S,
         "provider restored: /healthz 200 again after %.1f s (health_window_s %g + %g)"
         % (rec, window_s, RECOVERY_MARGIN_S))
    info("section: %.0f s" % (t_end - phase_start(ph, "baseline")))
    print("\n".join(out))


main()
