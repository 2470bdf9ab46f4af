#!/usr/bin/env python3
"""pycheck.py: pyflakes over the tree's Python (the tests, their fakes,
the benches and scripts), for `make lint`.

What pyflakes finds is what a test can hide behind: an import never
used, a name never defined, a result assigned and never read (a child's
exit status taken and never checked).  A line that says `# noqa` is
left alone, as flake8 does: the harness re-exports names on purpose.
The files are those scripts/check-size.py calls Python (the tracked
*.py, and the tracked files without an extension whose #! line names
python).  Exit 1 with one line per finding, 0 when there is none.
"""
import importlib.util
import os
import sys

from pyflakes import api, reporter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Findings(reporter.Reporter):
    """pyflakes' messages, less those on a `# noqa` line."""

    def __init__(self):
        super().__init__(sys.stdout, sys.stderr)
        self.found = []
        self.lines = {}

    def _source(self, path):
        if path not in self.lines:
            with open(path, encoding="utf-8", errors="replace") as f:
                self.lines[path] = f.read().splitlines()
        return self.lines[path]

    def flake(self, message):
        lines = self._source(message.filename)
        n = message.lineno
        if 0 < n <= len(lines) and "# noqa" in lines[n - 1]:
            return
        self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.found.append("%s:%s: %s" % (filename, lineno, msg))

    def unexpectedError(self, filename, msg):
        self.found.append("%s: %s" % (filename, msg))


def python_files():
    """The tracked Python sources, relative to the root: the files
    check-size.py calls Python (by extension, or by a #! line)."""
    spec = importlib.util.spec_from_file_location(
        "check_size", os.path.join(ROOT, "scripts", "check-size.py"))
    size = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(size)
    return sorted(p for p in size.tracked(ROOT) if size.kind(ROOT, p) == "py")


def main():
    os.chdir(ROOT)
    rep = Findings()
    files = python_files()
    for path in files:
        api.checkPath(path, rep)
    for line in rep.found:
        print(line)
    if rep.found:
        print("pycheck: %d finding(s) in %d files" % (len(rep.found), len(files)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
