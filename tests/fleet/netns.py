"""netns.py: a small network of this test's own: one namespace per host,
each with a veth pair into a bridge that lives in a "switch" namespace.

Addresses come from 198.18.0.0/15, the range set aside for benchmarking
network devices (RFC 2544): they exist only inside these namespaces, and
nothing in the root namespace routes to them, so every packet the test
sends stays on this machine.  Everything is created under one prefix and
removed by Net.close(), also after a failure, and Net.__init__ first
removes what an earlier, killed run may have left.
"""
import os
import subprocess

SUBNET = "198.18.0"
PREFIX_LEN = 24


def sh(*argv, check=True):
    p = subprocess.run(list(argv), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), p.stderr.strip()))
    return p


def existing():
    p = sh("ip", "netns", "list", check=False)
    return [l.split()[0] for l in p.stdout.splitlines() if l.strip()]


class Net:
    """Namespaces <prefix>-sw (the bridge) and <prefix>-<name> per node."""

    def __init__(self, prefix="enrfleet"):
        self.prefix = prefix
        self.sw = prefix + "-sw"
        self.nodes = {}  # name -> (namespace, address, switch-side link)
        for ns in existing():
            if ns.startswith(prefix + "-"):
                sh("ip", "netns", "del", ns, check=False)
        sh("ip", "netns", "add", self.sw)
        self.exec_sw("ip", "link", "add", "br0", "type", "bridge")
        self.exec_sw("ip", "link", "set", "br0", "up")
        self.exec_sw("ip", "link", "set", "lo", "up")

    def ns(self, name):
        return self.nodes[name][0]

    def addr(self, name):
        return self.nodes[name][1]

    def add(self, name, host_octet):
        """A node with address SUBNET.host_octet, linked to the bridge."""
        ns = "%s-%s" % (self.prefix, name)
        addr = "%s.%d" % (SUBNET, host_octet)
        port = "p-%s" % name  # the switch's side
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
           "netns", self.sw)
        self.exec_sw("ip", "link", "set", port, "master", "br0")
        self.exec_sw("ip", "link", "set", port, "up")
        self.exec(name, "ip", "link", "set", "lo", "up", ns=ns)
        self.exec(name, "ip", "addr", "add", "%s/%d" % (addr, PREFIX_LEN), "dev", "eth0", ns=ns)
        self.exec(name, "ip", "link", "set", "eth0", "up", ns=ns)
        self.nodes[name] = (ns, addr, port)
        return addr

    def exec(self, name, *argv, ns=None, check=True):
        return sh("ip", "netns", "exec", ns or self.ns(name), *argv, check=check)

    def exec_sw(self, *argv):
        return sh("ip", "netns", "exec", self.sw, *argv)

    def argv(self, name, *argv):
        """argv run inside node name (for Popen)."""
        return ["ip", "netns", "exec", self.ns(name)] + list(argv)

    def cut(self, name):
        """Takes the node's switch port down: its packets vanish, so a
        connect to it times out (a blackhole, not a refusal)."""
        self.exec_sw("ip", "link", "set", self.nodes[name][2], "down")

    def restore(self, name):
        self.exec_sw("ip", "link", "set", self.nodes[name][2], "up")

    def pids(self, name):
        p = sh("ip", "netns", "pids", self.ns(name), check=False)
        return [int(x) for x in p.stdout.split()]

    def close(self):
        for name in list(self.nodes):
            for pid in self.pids(name):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
        for ns in existing():
            if ns.startswith(self.prefix + "-"):
                sh("ip", "netns", "del", ns, check=False)
