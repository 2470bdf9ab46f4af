#!/usr/bin/env python3
"""test_secret_memory.py: the provider secret only where calls are made,
and in no core dump of the master or the status process.

enrichd (2 workers) with upstream_secret_file, as root (gcore and
/proc/PID/mem need it).
1. gcore (gdb) of the master, the status process and a worker: the
   master's and the status process's cores hold no form of the secret;
   the worker's /proc/PID/smaps marks the secret's mapping "dd"
   (MADV_DONTDUMP) and its core has no bytes of that mapping (the
   worker's libcurl keeps its own copies on the heap: what a worker's
   core holds is docs/operations.md's to say).
2. Every readable page of each process through /proc/PID/mem (which
   MADV_DONTDUMP does not hide): none in the status process; in the
   master exactly one copy, inside a "dd" mapping.  After a HUP that
   rotates the file: the master holds the new secret once and the old
   one nowhere (wiped, not just unmapped), the new workers the new one;
   a status process started after the reload holds none.
3. The master is not dumpable while it holds the secret; workers and the
   status process are (the master and the status process read their
   /proc/PID/fd).
4. A real core: RLIMIT_CORE unlimited, SIGABRT (the watchdog's signal)
   to the master: no core file written holds the secret.
5. The shipped unit writes no core at all (LimitCORE=0: a worker's
   would hold libcurl's copies of the key).
"""
# run alone: it takes cores of the pool's processes and reads their memory
# plain build only: what a process holds is the product's allocator's, not ASan's quarantine
import glob
import os
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402


def make_secret():
    return "k3y+/=" + os.urandom(12).hex()


def forms(secret):
    from urllib.parse import quote
    return [f.encode() for f in (secret, quote(secret, safe="-._~"), secret[6:])]


def write_secret(path, secret):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (secret + "\n").encode())
    os.close(fd)


def mappings(pid):
    """[(lo, hi, perms, dd)] from /proc/PID/smaps."""
    out, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) ", line)
            if m:
                cur = [int(m.group(1), 16), int(m.group(2), 16), m.group(3), False]
                out.append(cur)
            elif line.startswith("VmFlags:") and cur is not None:
                cur[3] = " dd" in line
    return out


def memory_hits(pid, needle):
    """[(lo, dd)] for each occurrence of needle in pid's readable memory."""
    hits = []
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for lo, hi, perms, dd in mappings(pid):
            if "r" not in perms or hi - lo > (1 << 30):
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue  # [vvar] and the like
            hits += [(lo, dd)] * data.count(needle)
    return hits


def gcore(pid, d):
    prefix = os.path.join(d, "gcore")
    subprocess.run(["gcore", "-o", prefix, str(pid)], capture_output=True, timeout=240)
    path = "%s.%d" % (prefix, pid)
    return path if os.path.exists(path) else None


def core_segments(path):
    """[(vaddr, filesz)] of an ELF64 core's PT_LOAD segments."""
    with open(path, "rb") as f:
        h = f.read(64)
        phoff, = struct.unpack_from("<Q", h, 32)
        phentsize, phnum = struct.unpack_from("<HH", h, 54)
        out = []
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            p_type, _flags, _off, vaddr, _pa, filesz = struct.unpack("<IIQQQQ", f.read(40))
            if p_type == 1:
                out.append((vaddr, filesz))
        return out


NOBODY = 65534


def dumpable(pid):
    """For a process running as nobody: /proc/PID/fd of one that is not
    dumpable belongs to root (and its smaps, mem, environ with it)."""
    return os.stat("/proc/%d/fd" % pid).st_uid == NOBODY


def spawn(env, key, cwd, nobody=False, core=False):
    """enrichd with the secret, started here (as nobody, or with cores on),
    its log where env's helpers read it."""
    run = os.path.join(env.dir, "run")
    os.makedirs(run, exist_ok=True)
    if nobody:
        for path in (run, key, cwd):
            os.chown(path, NOBODY, NOBODY)
    env.write_config("workers = 2\nupstream_url = http://127.0.0.1:9/v1\n"
                     "listen = %s/e.sock\nstatus_listen = %s/s.sock\nlisten_group =\n"
                     "upstream_secret_file = %s\nupstream_secret_header = X-Api-Key\n"
                     % (run, run, key))

    def pre():
        if core:
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)
        if nobody:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

    log = open(env.enrichd_log, "ab")
    p = subprocess.Popen([os.path.join(env.build, "enrichd"), "-c", env.conf], cwd=cwd,
                         stdout=log, stderr=log, start_new_session=True, preexec_fn=pre)
    log.close()
    env.procs.append(p)
    env.enrichd = p
    env.wait_log("ready", timeout=10)
    workers = env.wait_workers(2)
    harness.wait_for(env.status_pid, 5, what="status process")
    return p.pid, env.status_pid(), workers


def start(env, key):
    # No recycling (a sanitizer build is big): the workers read must live.
    env.start_enrichd("workers = 2\nmax_requests = 0\nrss_soft_mb = 4000\nrss_hard_mb = 8000\n"
                      "upstream_url = http://127.0.0.1:9/v1\n"
                      "upstream_secret_file = %s\nupstream_secret_header = X-Api-Key\n" % key)
    workers = env.wait_workers(2)
    harness.wait_for(env.status_pid, 5, what="status process")
    return env.master_pid(), env.status_pid(), workers


def test_cores(r):
    with harness.Env(name="secret-core") as env:
        key = os.path.join(env.dir, "key")
        secret = make_secret()
        write_secret(key, secret)
        master, status, workers = start(env, key)
        for name, pid in (("master", master), ("status process", status)):
            core = gcore(pid, env.dir)
            r.check(core is not None, "gcore of the %s" % name)
            if core:
                data = open(core, "rb").read()
                os.unlink(core)
                held = [f for f in forms(secret) if f in data]
                r.check(not held, "the %s's core (%d bytes) holds no form of the secret (%d did)"
                        % (name, len(data), len(held)))
        w = workers[0]
        dd = [(lo, hi) for lo, hi, _p, isdd in mappings(w) if isdd]
        kept = [lo for lo, isdd in memory_hits(w, secret.encode()) if isdd]
        r.check(len(kept) == 1, "the worker keeps the secret in a MADV_DONTDUMP mapping "
                "(%d copies there; dd mappings %r)" % (len(kept), dd))
        core = gcore(w, env.dir)
        r.check(core is not None, "gcore of a worker")
        if core:
            segs = core_segments(core)
            os.unlink(core)
            inside = [(v, n) for v, n in segs for lo, hi in dd if n > 0 and lo <= v < hi]
            r.check(segs and not inside,
                    "the worker's core has no bytes of its MADV_DONTDUMP mapping (%d segments, "
                    "%d of them dd: %r)" % (len(segs), len(inside), inside))


def test_memory_and_rotation(r):
    with harness.Env(name="secret-mem") as env:
        key = os.path.join(env.dir, "key")
        old = make_secret()
        write_secret(key, old)
        master, status, workers = spawn(env, key, env.dir, nobody=True)
        hs = memory_hits(status, old.encode())
        r.check(not hs, "the status process's memory holds no copy of the secret (%d)" % len(hs))
        hm = memory_hits(master, old.encode())
        r.check(len(hm) == 1 and hm[0][1],
                "the master holds exactly one copy, in a MADV_DONTDUMP mapping: %r" % hm)
        r.check(not dumpable(master), "the master holding the secret is not dumpable")
        r.check(all(dumpable(p) for p in workers + [status]),
                "workers and the status process are dumpable (their /proc/PID/fd is read)")
        new = make_secret()
        write_secret(key, new)
        os.chown(key, NOBODY, NOBODY)
        env.signal(signal.SIGHUP)
        harness.wait_for(lambda: not set(env.worker_pids()) & set(workers)
                         and len(env.worker_pids()) == 2, 20, what="the new generation")
        hm_old = memory_hits(master, old.encode())
        hm_new = memory_hits(master, new.encode())
        r.check(not hm_old, "after the HUP the old secret is nowhere in the master (%r)" % hm_old)
        r.check(len(hm_new) == 1 and hm_new[0][1],
                "and the new one once, in a MADV_DONTDUMP mapping: %r" % hm_new)
        nw = env.worker_pids()[0]
        r.check(memory_hits(nw, new.encode()) and not memory_hits(nw, old.encode()),
                "a new worker holds the new secret, not the old")
        st = env.status_pid()
        r.check(not memory_hits(st, new.encode()) and not memory_hits(st, old.encode()),
                "the status process holds neither")
        # one forked after the commit, when both configurations are one
        os.kill(st, signal.SIGKILL)
        st2 = harness.wait_for(lambda: env.status_pid() not in (None, st) and env.status_pid(),
                               10, what="a new status process")
        r.check(not memory_hits(st2, new.encode()),
                "a status process started after the reload holds none either")
        r.check(len(memory_hits(master, new.encode())) == 1, "and the master still its one copy")


def test_sigabrt_core(r):
    pattern = open("/proc/sys/kernel/core_pattern").read().strip()
    if pattern.startswith("|") or "/" in pattern:
        # A core_pattern elsewhere (a pipe to systemd-coredump, a directory)
        # is not this test's to change: the gcore tests above stand.
        print("core_pattern is %r: the SIGABRT core is not looked for" % pattern)
        return
    with harness.Env(name="secret-abrt") as env:
        key = os.path.join(env.dir, "key")
        secret = make_secret()
        write_secret(key, secret)
        cwd = tempfile.mkdtemp(prefix="cores-", dir=env.dir)
        spawn(env, key, cwd, core=True)
        p = env.enrichd
        os.kill(p.pid, signal.SIGABRT)
        rc = p.wait(15)
        time.sleep(0.5)  # the children, killed by their parent-death signal
        cores = [c for c in glob.glob(os.path.join(cwd, "core*")) if os.path.isfile(c)]
        held = [c for c in cores if any(f in open(c, "rb").read() for f in forms(secret))]
        r.check(rc == -signal.SIGABRT, "SIGABRT ended the master (rc %r)" % rc)
        r.check(not held, "no core written holds the secret (%d cores, %d with it)"
                % (len(cores), len(held)))
        print("SIGABRT to the master: %d core file(s)" % len(cores))


def test_unit(r):
    unit = os.path.join(harness.ROOT, "conf", "systemd", "enrichd.service")
    lines = [l.strip() for l in open(unit)]
    r.check("LimitCORE=0" in lines, "the shipped unit writes no core (LimitCORE=0)")


def main():
    r = harness.Results()
    if os.getuid() != 0:
        print("needs root (gcore, /proc/PID/mem of the daemon's processes)")
        r.check(False, "run as root")
        r.done()
    r.run(test_cores)
    r.run(test_memory_and_rotation)
    r.run(test_sigabrt_core)
    r.run(test_unit)
    r.done()


if __name__ == "__main__":
    main()
