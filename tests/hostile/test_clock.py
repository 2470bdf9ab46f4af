#!/usr/bin/env python3
"""test_clock.py: an NTP step of the wall clock changes nothing the pool
decides.  Every age and deadline the master, the workers and the status
process compare is CLOCK_MONOTONIC; the wall clock is for display only.

The whole daemon runs under tests/hostile/clockshift.c (LD_PRELOAD),
which moves CLOCK_REALTIME, gettimeofday() and time() by the number of
seconds in a file; the test rewrites that file to step the clock by
+1 h and then -1 h while requests are in flight.

- +1 h under load, with requests in flight across the step: no worker
  exits with reason timeout, no request fails, the ages /status and
  /metrics report stay real.
- -1 h while a request is genuinely stuck (test-hooks build, header
  X-Test-Hang-Ms): the master still kills it as a timeout, on time.
- The day's budget (youtube_daily_quota = 20, budget_burst_s = 0) with
  the wall clock at Pacific noon, then stepped a day back and a day
  forward ten times, batches of new ids asked at each: the YouTube fake
  (its log, in real time) sees at most the pace's 10 calls of the real
  day, never a second day's budget, and /status says what it counted.
"""
import calendar
import datetime
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402
import providers_fixture as pf  # noqa: E402

SHIM_SRC = os.path.join(HERE, "clockshift.c")
TIMEOUT_MS = 3000  # request_timeout_ms
GRACE_MS = 500  # kill_grace_ms
LONG_MS = 2000  # requests in flight across the +1 h step (within TIMEOUT_MS)
STEP_S = 3600
DAY_S = 86400
QUOTA = 20  # youtube_daily_quota: at Pacific noon, with no burst, the pace allows 10


def build_shim(d):
    out = os.path.join(d, "clockshift.so")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2", "-Wall", "-Wextra",
                    "-o", out, SHIM_SRC], check=True)
    return out


def step(path, seconds):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % seconds)
    os.rename(tmp, path)


def log_wall(env, msg):
    """Wall-clock seconds of the log lines msg (the shim moves them too)."""
    out = []
    for e in env.log_events(msg):
        try:
            out.append(calendar.timegm(time.strptime(e.get("ts", "")[:19], "%Y-%m-%dT%H:%M:%S")))
        except ValueError:
            pass
    return out


def status_ages(env):
    """request_age_ms of every busy process in /status?full, and the
    largest enrichd_worker_current_request_age_seconds in /metrics."""
    st, _, body = env.request("/status?full", method="GET")
    doc = json.loads(body) if st == 200 else {}
    ages = [p.get("request_age_ms", 0) for p in doc.get("processes", [])]
    st, _, text = env.request("/metrics", method="GET")
    m = 0.0
    for line in text.decode().splitlines():
        if line.startswith("enrichd_worker_current_request_age_seconds{"):
            m = max(m, float(line.rsplit(" ", 1)[1]))
    return ages, m


def long_request(env, out, ms):
    t0 = time.monotonic()
    try:
        st, _, _ = env.request("/v1/enrich", harness.sample_body(5),
                               headers={"X-Test-Sleep-Ms": str(ms)}, timeout=20)
    except Exception as e:  # a reset is a failed request
        st = repr(e)
    out.append((st, time.monotonic() - t0))


def test_clock_steps(r):
    build = harness.hooks_build_dir()
    with harness.Env(build=build, name="hostile-clock") as env:
        shim = build_shim(env.dir)
        offset = os.path.join(env.dir, "clock-offset")
        step(offset, 0)
        env.start_enrichd("workers = 4\nrequest_timeout_ms = %d\nkill_grace_ms = %d\n"
                          "slow_request_ms = 1500\n" % (TIMEOUT_MS, GRACE_MS),
                          env={"LD_PRELOAD": shim, "ENR_CLOCKSHIFT_FILE": offset})
        env.start_nginx()
        env.wait_workers(4)
        body = harness.sample_body(20)

        # -- +1 h with requests in flight across the step -----------------
        load = harness.Load(env, clients=3, body=body)
        longs = []
        threads = [threading.Thread(target=long_request, args=(env, longs, LONG_MS))
                   for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.4)  # the long ones are in the workers now
        before_wall = time.time()
        step(offset, STEP_S)
        time.sleep(0.3)
        ages, metric_age = status_ages(env)
        for t in threads:
            t.join(30)
        time.sleep(1.5)  # more master ticks and health samples after the step
        ages2, metric_age2 = status_ages(env)
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        # The long requests log "slow request" after the step, stamped by the
        # workers' wall clock: proof that the shim moved it.
        stamps = log_wall(env, "slow request")
        r.check(len(stamps) >= 3 and min(stamps) - before_wall > STEP_S - 60,
                "the shim stepped the workers' wall clock by +1 h (log ts - now: %r)"
                % [s - int(before_wall) for s in stamps])
        r.check(len(res) >= 20, "load ran: %d requests" % len(res))
        r.check(not fails, "+1 h: zero failed requests (%d of %d failed: %r)"
                % (len(fails), len(res), fails[:3]))
        r.check(len(longs) == 3 and all(st == 200 for st, _ in longs),
                "+1 h: the requests in flight across the step all answered 200: %r" % longs)
        timeouts = [e for e in env.log_events("worker exit") if e.get("reason") == "timeout"]
        r.check(not timeouts, "+1 h: no worker exit with reason timeout (%d: %r)"
                % (len(timeouts), [e.get("worker_pid") for e in timeouts]))
        r.check(max(ages + ages2 + [0]) < 10000,
                "+1 h: /status request ages stay real (max %d ms)" % max(ages + ages2 + [0]))
        r.check(max(metric_age, metric_age2) < 10,
                "+1 h: /metrics request age stays real (max %.1f s)"
                % max(metric_age, metric_age2))
        print("+1 h: %d requests, %d failed, in flight across the step %r, timeout exits %d, "
              "max age /status %d ms /metrics %.1f s" % (len(res), len(fails), longs, len(timeouts),
                                                       max(ages + ages2 + [0]),
                                                       max(metric_age, metric_age2)))
        st, _, hz = env.request("/healthz", method="GET")
        r.check(st == 200, "+1 h: /healthz still ok: %d %r" % (st, hz[:200]))

        # -- -1 h while a request is stuck ------------------------------------
        stuck = []
        before = len([e for e in env.log_events("worker exit") if e.get("reason") == "timeout"])
        nlost = len(env.log_events("request lost with its worker"))
        t = threading.Thread(target=lambda: stuck.append(_timed(env, {"X-Test-Hang-Ms": "30000"})))
        t0 = time.monotonic()
        t.start()
        time.sleep(0.5)
        step(offset, -STEP_S)  # 2 h back from the +1 h step: -1 h from the real time
        limit = (TIMEOUT_MS + 1000 + GRACE_MS) / 1000 + 0.5
        try:
            env.wait_log("worker exit", count=before + 1, timeout=limit + 3,
                         pred=lambda e: e.get("reason") == "timeout")
            killed_after = time.monotonic() - t0
        except TimeoutError:
            killed_after = None
        r.check(killed_after is not None and TIMEOUT_MS / 1000 <= killed_after <= limit,
                "-1 h: the stuck request's worker killed as a timeout on time: %s s "
                "(request_timeout %.1f s, limit %.1f s)"
                % ("never" if killed_after is None else "%.2f" % killed_after,
                   TIMEOUT_MS / 1000, limit))
        t.join(35)
        exits = log_wall(env, "worker exit")
        r.check(exits and exits[-1] - time.time() < -STEP_S + 60,
                "the shim stepped the master's wall clock to -1 h (log ts - now: %d s)"
                % (exits[-1] - time.time() if exits else 0))
        lost = env.log_events("request lost with its worker")[nlost:]
        age = int(lost[-1]["req_age_ms"]) if lost else -1
        r.check(TIMEOUT_MS <= age <= limit * 1000,
                "-1 h: the lost request's age is its real age: %d ms" % age)
        print("-1 h: stuck request killed after %s s, lost request age %d ms"
              % (killed_after, age))
        r.check(stuck and stuck[0][0] != 200, "-1 h: the stuck request was not answered 200: %r"
                % stuck)
        env.wait_workers(4)
        st, _, _ = env.request("/v1/enrich", body)
        r.check(st == 200, "-1 h: the pool serves after the kill (%d)" % st)


def _timed(env, headers):
    t0 = time.monotonic()
    try:
        st, _, _ = env.request("/v1/enrich", b"[]", headers=headers, timeout=20)
    except Exception as e:
        st = repr(e)
    return st, time.monotonic() - t0


def pacific_noon_offset():
    """Seconds from now to noon of the current Pacific day (YouTube's)."""
    import zoneinfo
    now = datetime.datetime.now(zoneinfo.ZoneInfo("America/Los_Angeles"))
    return int((now.replace(hour=12, minute=0, second=0, microsecond=0) - now).total_seconds())


def test_budget_steps(r):
    fake = pf.ApiFake("youtube", "--key", "AIzaSyClockStepKey", "--token", "x")
    try:
        with harness.Env(name="hostile-clock-budget") as env:
            shim = build_shim(env.dir)
            offset = os.path.join(env.dir, "clock-offset")
            # A minute past noon: the pace's share stays 10 for the next 72 minutes.
            noon = pacific_noon_offset() + 60
            step(offset, noon)
            key = os.path.join(env.dir, "youtube.key")
            pf.write_secret(key, "AIzaSyClockStepKey")
            fake.control(quota=10 ** 6, quota_used=0)
            env.start_enrichd("workers = 2\nyt_source = youtube\nvm_source = off\n"
                              "dm_source = off\nyoutube_url = http://127.0.0.1:%d/youtube/v3\n"
                              "youtube_key_file = %s\nyoutube_daily_quota = %d\n"
                              "budget_burst_s = 0\nbudget_file = %s\n"
                              % (fake.port, key, QUOTA, os.path.join(env.dir, "budget")),
                              env={"LD_PRELOAD": shim, "ENR_CLOCKSHIFT_FILE": offset})
            env.start_nginx()
            env.wait_workers(2)
            t0 = time.time()
            n = [0]

            def ask(k):
                """k batches of one new id each: a call each, if the budget allows."""
                for _ in range(k):
                    n[0] += 1
                    st, _, _ = harness.post(env, [{"provider": "yt", "id": "Ck%09d" % n[0]}])
                    r.check(st == 200, "a batch answered 200 (%d)" % st) if st != 200 else None

            ask(QUOTA)  # at noon: the pace's 10, the rest deferred
            first = len(fake.log())
            for _ in range(10):
                step(offset, noon - DAY_S)
                time.sleep(0.1)  # every process reads the shim's file within 5 ms
                ask(QUOTA // 2)
                step(offset, noon + DAY_S)
                time.sleep(0.1)
                ask(QUOTA // 2)
            step(offset, noon)
            time.sleep(0.1)
            calls = [e for e in fake.log() if e["path"].startswith("/youtube/v3/videos")
                     and e["t"] >= t0 - 1]
            spent = harness.get_json(env, "/status")["upstream"]["sources"]["youtube"]["budget"]
            r.check(first <= QUOTA // 2 + 1,
                    "at noon the pace allowed its share: %d calls of %d batches" % (first, QUOTA))
            r.check(len(calls) <= QUOTA,
                    "20 clock steps of a day either way in %.0f s of real time: %d calls, at most "
                    "the day's %d (the pace's %d at noon)"
                    % (time.time() - t0, len(calls), QUOTA, QUOTA // 2))
            r.check(len(calls) == first,
                    "no step gave a unit back: %d calls after the steps, %d before"
                    % (len(calls), first))
            r.check(spent.get("spent") == len(calls),
                    "/status says what the provider counted: spent %s, %d calls"
                    % (spent.get("spent"), len(calls)))
            print("budget: %d batches, %d calls (the pace allowed %d at noon), /status spent %s"
                  % (n[0], len(calls), QUOTA // 2, spent.get("spent")))
    finally:
        fake.close()


if __name__ == "__main__":
    harness.run_tests(test_clock_steps, test_budget_steps)
