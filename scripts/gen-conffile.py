#!/usr/bin/env python3
"""gen-conffile.py [--sysconfdir DIR] CONF: the configuration file `make install` ships
(/etc/enrichd/enrichd.conf), made from conf/enrichd.conf (every key with
its default and its documentation, the source of enrichd.conf(5)).

Only the keys operators set on a new host stay set (OPERATOR_KEYS); every
other is commented out at its default, so a later release's new default
reaches it and a key removed later does not break an edited file.  The
comments are kept as they are: the file documents itself."""
import re
import sys

# What a host is set up with: the sockets, the pool's size, the upstream
# and the capture.  Everything else is a tuning knob at its default.
OPERATOR_KEYS = (
    "listen", "listen_mode", "listen_group", "listen_allow", "status_listen", "workers",
    "upstream_url", "capture_dir", "capture_sample", "cache_file",
)

# Keys the installed file sets to a value of its own: the built-in
# default suits a build run by hand, the package's suits the unit (its
# StateDirectory).
PACKAGED = {"cache_file": "/var/lib/enrichd/cache"}

HEADER = """\
# enrichd.conf (enrichd.conf(5)).  The keys a host is set up with are set below;
# every other key is commented out at its default (`# key = default`):
# uncomment it to change it.  A key left commented follows the release's
# default.  `enrichd -t -c FILE` checks the file.
"""


INCLUDE = """
## --- this host's own files ---------------------------------------------

# Every file in conf.d ending in .conf, in name order, read as if its lines
# stood here (a key may still be set once in all of them together): a
# package or a configuration manager can drop a file there instead of
# editing this one.
include = {sysconfdir}/enrichd/conf.d/*.conf
"""


def main():
    args = sys.argv[1:]
    sysconfdir = "/etc"
    if args[:1] == ["--sysconfdir"]:
        sysconfdir, args = args[1], args[2:]
    src = open(args[0], encoding="utf-8").read().splitlines()
    out = []
    out = HEADER.rstrip("\n").split("\n")
    for line in src[1:]:  # the source's title says it sets every key
        m = re.match(r"^(\w+) =(.*)$", line)
        if m and m.group(1) in PACKAGED:
            line = "%s = %s" % (m.group(1), PACKAGED[m.group(1)])
        elif m and m.group(1) not in OPERATOR_KEYS:
            line = "# " + line
        out.append(line)
    sys.stdout.write("\n".join(out) + "\n" + INCLUDE.format(sysconfdir=sysconfdir))


if __name__ == "__main__":
    main()
