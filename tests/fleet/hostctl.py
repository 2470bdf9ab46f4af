#!/usr/bin/env python3
"""hostctl.py: what scripts/rolling-restart runs for one host of the test
fleet (test_fleet.py), standing in for `ssh HOST systemctl restart
enrichd` and a readiness probe:

  hostctl.py restart DIR HOST   TERM the host's master, wait for its drain
                                to end, start a new one in the host's
                                network namespace
  hostctl.py ready DIR HOST     exit 0 when the host's /readyz answers 200
                                on its operators' server (asked from the
                                front, as the fleet sees it)

HOST is a host's name (h1) or its address, as rolling-restart is given
the hosts.

DIR is the fleet's directory: DIR/HOST/ holds enrichd.conf, master.pid
and addr; DIR/enrichd is the path of the daemon; DIR/prefix the namespace
prefix.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

DRAIN_WAIT_S = 20


def read(path):
    with open(path) as f:
        return f.read().strip()


alive = harness.pid_alive


def start(d, host, binary=None, env=None):
    hd = os.path.join(d, host)
    logf = open(os.path.join(hd, "enrichd.log"), "ab")
    p = subprocess.Popen(["ip", "netns", "exec", "%s-%s" % (read(os.path.join(d, "prefix")), host),
                          binary or read(os.path.join(d, "enrichd")), "-c",
                          os.path.join(hd, "enrichd.conf")],
                         stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, start_new_session=True,
                         env=dict(os.environ, **(env or {})))
    with open(os.path.join(hd, "master.pid"), "w") as f:
        f.write(str(p.pid))
    return p.pid


def host_name(d, host):
    """The host's name for a name or an address."""
    if os.path.isfile(os.path.join(d, host, "addr")):
        return host
    for name in sorted(os.listdir(d)):
        a = os.path.join(d, name, "addr")
        if os.path.isfile(a) and read(a) == host:
            return name
    raise SystemExit("hostctl: no host %r in %s" % (host, d))


def restart(d, host):
    host = host_name(d, host)
    pid = int(read(os.path.join(d, host, "master.pid")))
    os.kill(pid, signal.SIGTERM)
    t = time.monotonic()
    while alive(pid):
        if time.monotonic() - t > DRAIN_WAIT_S:
            print("hostctl: %s: master %d still draining after %d s" % (host, pid, DRAIN_WAIT_S),
                  file=sys.stderr)
            return 1
        time.sleep(0.05)
    start(d, host)
    return 0


def ready(d, host):
    addr = read(os.path.join(d, host_name(d, host), "addr"))
    p = subprocess.run(["ip", "netns", "exec", "%s-front" % read(os.path.join(d, "prefix")),
                        "curl", "-fsS", "-o", "/dev/null", "-m", "1",
                        "http://%s:%s/readyz" % (addr, harness.NGINX_OPS_TOKENS["ops_listen"])],
                       capture_output=True)
    return p.returncode


def main():
    cmd, d, host = sys.argv[1:4]
    return {"restart": restart, "ready": ready}[cmd](d, host)


if __name__ == "__main__":
    sys.exit(main())
