#!/usr/bin/env python3
"""test_signals.py: every signal a user or a tool may send, to every
process of the pool (enrichd(8), SIGNALS): none kills the pool.

- the master, the status process and each worker take USR1, USR2, XFSZ,
  ALRM, VTALRM, PROF, IO, PWR, STKFLT, TSTP, TTIN, TTOU, WINCH, URG, CONT,
  the fault signals sent by hand (SEGV, BUS, FPE, ILL, TRAP, SYS) and
  real-time signals: every process lives on with the same pid, requests
  and /healthz answer 200, and each noted signal is said in one
  "signal ignored" line with its name and the sender's pid;
- HUP and INT sent to a worker or the status process are theirs to
  ignore (they are the master's), said so in the line; ALRM is their
  header timer's (not noted), USR2 a worker's drain (below);
- a flood of one signal is one line a second, with the count;
- TERM, QUIT or USR2 sent to one worker by someone other than the master:
  the worker finishes and exits 0, the master logs reason=signal at info
  (not error, not crash), replaces it, and no request fails."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

BODY = harness.sample_body(10)
S = signal.Signals
NOTED = [S.SIGUSR1, S.SIGUSR2, S.SIGXFSZ, S.SIGALRM, S.SIGVTALRM, S.SIGPROF, S.SIGIO, S.SIGPWR,
         S.SIGSTKFLT, S.SIGTSTP, S.SIGTTIN, S.SIGTTOU, S.SIGSEGV, S.SIGBUS, S.SIGFPE, S.SIGILL,
         S.SIGTRAP, S.SIGSYS, signal.SIGRTMIN, signal.SIGRTMIN + 5, signal.SIGRTMAX]
SILENT = [S.SIGWINCH, S.SIGURG, S.SIGCONT]


def name(sig):
    sig = int(sig)
    if signal.SIGRTMIN <= sig <= signal.SIGRTMAX:
        return "RTMIN+%d" % (sig - signal.SIGRTMIN)
    return "POLL" if sig == signal.SIGIO else signal.Signals(sig).name[3:]


def serving(env):
    st, _, data = env.request("/v1/enrich", BODY)
    hz, _, _ = env.request("/healthz", method="GET")
    return st == 200 and data.count(b"\n") == 10 and hz == 200


def ignored_lines(env, pid):
    return [e for e in env.log_events("signal ignored") if e.get("pid") == str(pid)]


def test_every_process(r):
    with harness.Env(name="signals-all") as env:
        workers = env.start_stack("workers = 2\n", workers=2)
        r.check(serving(env), "serving before the signals")
        master, status = env.master_pid(), env.status_pid()
        roles = [("master", master), ("status process", status), ("worker", workers[0])]
        if status is None:
            r.check(False, "the status process started")
            return
        for role, pid in roles:
            sent = list(NOTED)
            if role != "master":
                sent = [x for x in sent if x != S.SIGALRM] + [S.SIGHUP, S.SIGINT]
            if role == "worker":
                sent.remove(S.SIGUSR2)
            for sig in sent + SILENT:
                os.kill(pid, sig)
                time.sleep(0.02)  # standard signals sent together would merge
            # Idle processes take them at once; a worker after its request.
            serving(env)
            want = {name(s) for s in sent}

            def logged():
                got = {e.get("signal") for e in ignored_lines(env, pid)}
                return got if want <= got else None
            try:
                harness.wait_for(logged, 5, what="the lines")
            except Exception:
                pass
            lines = ignored_lines(env, pid)
            got = {e.get("signal") for e in lines}
            r.check(harness.pid_alive(pid), "%s (pid %d) alive after %d signals" % (role, pid,
                                                                                    len(sent)))
            r.check(want <= got, "%s: one 'signal ignored' line for each noted signal; missing %r"
                    % (role, sorted(want - got)))
            r.check(not ({name(s) for s in SILENT} & got),
                    "%s: WINCH, URG and CONT are ignored without a line" % role)
            me = str(os.getpid())
            r.check(lines and all(e.get("sender_pid") == me and e.get("count") == "1"
                                  for e in lines),
                    "%s: each line names the sender's pid and the count: %r" % (role, lines[:2]))
            if role != "master":
                why = {e.get("signal"): e.get("why", "") for e in lines}
                r.check("master's" in why.get("HUP", "") and "master's" in why.get("INT", ""),
                        "%s: HUP and INT are said to be the master's: %r" % (role, why.get("HUP")))
        r.check(serving(env), "still serving after every process had every signal")
        r.check(env.master_pid() == master and env.status_pid() == status and
                set(env.wait_workers(2)) == set(workers),
                "no process replaced: master, status process and workers are the same pids")
        r.check(not env.log_events("worker exit") and not env.log_events("status process exit"),
                "no exit logged: %r" % [e.get("reason") for e in env.log_events("worker exit")])

        # A flood: one line a second at most, the count in it.
        before = len(ignored_lines(env, master))
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 1.5:
            os.kill(master, signal.SIGUSR1)
            n += 1
            time.sleep(0.002)
        time.sleep(1.2)
        os.kill(master, signal.SIGUSR1)  # a late one, to flush the count held back
        n += 1
        time.sleep(0.3)
        flood = ignored_lines(env, master)[before:]
        total = sum(int(e.get("count", "0")) for e in flood)
        r.check(2 <= len(flood) <= 4, "%d USR1 in 1.5 s: %d lines (one a second)" % (n, len(flood)))
        r.check(0 < total <= n, "the lines count them (%d of %d sent; pending ones merge)"
                % (total, n))
        r.check(harness.pid_alive(master) and serving(env), "the master lives through the flood")


def test_outside_stop(r):
    """TERM, QUIT, USR2 to one worker (not from the master): reason=signal."""
    with harness.Env(name="signals-worker") as env:
        env.start_stack("workers = 2\n", workers=2)
        load = harness.Load(env, clients=2, body=BODY)
        harness.wait_for(lambda: load.count() > 10, 20, what="load")
        for i, sig in enumerate((signal.SIGUSR2, signal.SIGTERM, signal.SIGQUIT)):
            victim = env.wait_workers(2)[0]
            os.kill(victim, sig)
            ev = env.wait_log("worker exit", count=i + 1, timeout=10)
            e = ev[i]
            r.check(e.get("worker_pid") == str(victim) and e.get("reason") == "signal" and
                    e.get("level") == "info" and e.get("exit_code") == "0",
                    "%s to a worker: exit 0, logged reason=signal at info: %r"
                    % (name(sig), {k: e.get(k) for k in ("reason", "level", "exit_code")}))
            harness.wait_for(lambda: victim not in env.worker_pids() and
                             len(env.worker_pids()) == 2, 10, what="replaced")
        n0 = load.count()
        harness.wait_for(lambda: load.count() > n0 + 10, 20, what="load after")
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(not fails, "no request failed across the three stops (%d): %r"
                % (len(res), fails[:3]))
        r.check(not env.log_events("crash loop: holding forks"), "no crash loop")
        _, _, data = env.request("/metrics", method="GET")
        r.check(b'enrichd_worker_exits_total{reason="signal"} 3' in data,
                "/metrics counts them as reason=\"signal\"")


if __name__ == "__main__":
    harness.run_tests(test_every_process, test_outside_stop)
