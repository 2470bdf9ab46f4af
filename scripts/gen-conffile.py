#!/usr/bin/env python3
"""gen-conffile.py CONF: the configuration file `make install` ships
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
    "upstream_url", "capture_dir", "capture_sample",
)

HEADER = """\
# enrichd.conf (enrichd.conf(5)).  The keys a host is set up with are set below;
# every other key is commented out at its default (`# key = default`):
# uncomment it to change it.  A key left commented follows the release's
# default.  `enrichd -t -c FILE` checks the file.
"""


def main():
    src = open(sys.argv[1], encoding="utf-8").read().splitlines()
    out = []
    out = HEADER.rstrip("\n").split("\n")
    for line in src[1:]:  # the source's title says it sets every key
        m = re.match(r"^(\w+) =(.*)$", line)
        if m and m.group(1) not in OPERATOR_KEYS:
            line = "# " + line
        out.append(line)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
