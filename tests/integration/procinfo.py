"""procinfo.py: what /proc and ss(8) say of a process, for the
integration tests: its children, whether it is alive (a zombie is not)
or a status process, its descriptors (all, or the sockets to an
upstream's port), a kB field of its status, and a unix listening
socket's queue.  Reads only.  harness.py re-exports every name here:
the suites take them from it.
"""
import os
import subprocess


def parents():
    """{ppid: [pid, ...]} of every live process (zombies left out), one
    pass over /proc."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            if fields[0] != "Z":
                kids.setdefault(int(fields[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return kids


def children(pid):
    """Direct children of pid (from /proc)."""
    return sorted(parents().get(pid, []))


def descendants(pid):
    """pid and every process below it."""
    kids, out, todo = parents(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def is_status_process(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().startswith(b"enrichd: status")
    except OSError:
        return False


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.rfind(")") + 2:].split()[0] != "Z"
    except OSError:
        return False


def fd_count(pid):
    """The open descriptors of pid."""
    return len(os.listdir("/proc/%d/fd" % pid))


def socket_inodes_to(port):
    """Inodes of TCP sockets connected to 127.0.0.1:port (any state)."""
    inodes = set()
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                next(fh)
                for line in fh:
                    parts = line.split()
                    if int(parts[2].rsplit(":", 1)[1], 16) == port:
                        inodes.add(parts[9])
        except OSError:
            pass
    return inodes


def upstream_fds(pid, port):
    """Descriptors of pid that are sockets to the upstream at port."""
    inodes = socket_inodes_to(port)
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if t.startswith("socket:[") and t[8:-1] in inodes:
            n += 1
    return n


def ss_listen_queue(path):
    """Recv-Q of the unix listening socket at path, as `ss -xl` prints it."""
    out = subprocess.run(["ss", "-xlnH"], capture_output=True, text=True, timeout=10).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[4] == path:
            return int(f[2])
    return None


def proc_status_kb(pid, key):
    """A kB field of /proc/PID/status (VmRSS, VmHWM, ...), 0 when the
    process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
