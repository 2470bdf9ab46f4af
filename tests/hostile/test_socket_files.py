#!/usr/bin/env python3
"""test_socket_files.py: the unix sockets are made where no one else can
plant or swap entries, with their mode and group before they listen.

- a socket directory writable by every user without the sticky bit, or
  by another group: enrichd refuses to start, saying why, and leaves no
  socket file behind (there, anyone could swap the socket for a link
  between bind and chmod, and have enrichd chmod the link's target);
- a sticky directory writable by all (as /tmp): enrichd starts, and the
  sockets have listen_mode and listen_group; a link planted at the
  socket's path by another user (nobody) is refused, never followed: its
  target keeps its mode and group;
- nobody (not in the socket's group) cannot connect; the group can.
(Runs as root: it plants as nobody and gives the sockets www-data.)"""
import os
import socket
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

def start_in(env, d, extra=""):
    """enrichd with both sockets in d; returns (exit code or None, log)."""
    env.sock = os.path.join(d, "enrichd.sock")
    env.status_sock = os.path.join(d, "status.sock")
    proc = env.start_enrichd("workers = 1\n" + extra, wait_ready=False)
    try:
        harness.wait_for(lambda: proc.poll() is not None or env.log_events("ready"), 10,
                         what="start or exit")
    except Exception:  # noqa: BLE001
        pass
    return proc.poll(), env.log_events("cannot open sockets")


def test_unsafe_directories_refused(r):
    for mode, gid, what in ((0o777, 0, "writable by every user without the sticky bit"),
                            (0o775, harness.NOBODY,
                             "writable by another group without the sticky bit")):
        d = tempfile.mkdtemp(prefix="sockdir-")
        os.chown(d, 0, gid)
        os.chmod(d, mode)
        with harness.Env(name="sock-unsafe") as env:
            rc, ev = start_in(env, d)
            err = ev[0].get("error", "") if ev else ""
            r.check(rc == 1 and what in err and d in err,
                    "socket directory mode %04o group %d: refused at start (exit %r): %r"
                    % (mode, gid, rc, err[:200]))
            r.check(not os.path.exists(env.sock) and not os.path.exists(env.status_sock),
                    "no socket file left behind: %r" % os.listdir(d))


def test_sticky_directory(r):
    d = tempfile.mkdtemp(prefix="sockdir-sticky-")
    os.chmod(d, 0o1777)
    outside = tempfile.mkdtemp(prefix="sock-outside-")
    target = os.path.join(outside, "target")
    with open(target, "w") as f:
        f.write("x")
    os.chmod(target, 0o600)
    # Planted first, at the socket's path: a link to a file of root's.
    r.check(harness.as_user(lambda: os.symlink(target, os.path.join(d, "enrichd.sock"))),
            "nobody plants a link at the socket's path")
    with harness.Env(name="sock-planted") as env:
        rc, ev = start_in(env, d)
        err = ev[0].get("error", "") if ev else ""
        r.check(rc == 1 and "File exists" in err, "a planted link is refused (exit %r): %r"
                % (rc, err[:200]))
    st = os.stat(target)
    r.check(stat.S_IMODE(st.st_mode) == 0o600 and st.st_gid == 0,
            "the link's target keeps its mode and group: %04o gid %d"
            % (stat.S_IMODE(st.st_mode), st.st_gid))
    os.unlink(os.path.join(d, "enrichd.sock"))

    with harness.Env(name="sock-sticky") as env:
        rc, ev = start_in(env, d, "listen_mode = 0660\nlisten_group = www-data\n")
        r.check(rc is None and not ev, "a sticky directory (as /tmp) is fine: %r" % ev)
        if rc is not None:
            return
        import grp
        www = grp.getgrnam("www-data").gr_gid
        for p in (env.sock, env.status_sock):
            st = os.lstat(p)
            r.check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660 and
                    st.st_gid == www, "%s: a socket, 0660, group www-data: %04o gid %d"
                    % (os.path.basename(p), stat.S_IMODE(st.st_mode), st.st_gid))

        def connects():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(env.sock)
                return True
            except OSError:
                return False
            finally:
                s.close()
        r.check(not harness.as_user(connects), "nobody cannot connect")
        r.check(harness.as_user(connects, gid=www), "the socket's group can")
        out = subprocess.run(["ss", "-xl"], capture_output=True, text=True).stdout
        r.check(env.sock in out, "ss shows the socket under its own path")


if __name__ == "__main__":
    res = harness.Results()
    if not harness.IS_ROOT:
        res.check(False, "needs root (plants as nobody, sockets for www-data)")
    else:
        res.run(test_unsafe_directories_refused)
        res.run(test_sticky_directory)
    res.done()
