"""A part of a document made by a script: the text between two marker
lines, checked against what the script makes now (make lint) or
rewritten with it.  failkinds.py and incgraph.py keep theirs this way."""


def sync(path, begin, end, new, write, hint):
    """0 when path's part between begin and end is new (or was rewritten
    to it, write); else says so with hint (the command that remakes it)
    and returns 1."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if begin not in text or end not in text:
        print("%s: no %s ... %s" % (path, begin, end))
        return 1
    head, rest = text.split(begin, 1)
    old, tail = rest.split(end, 1)
    if old == new:
        return 0
    if not write:
        print("%s: %s" % (path, hint))
        return 1
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(head + begin + new + end + tail)
    return 0
