#!/usr/bin/env python3
"""test_log_injection.py: a value from outside never forges a log field or line.

A provider whose certificate a trusted CA signed for crafted names (a
subjectAltName holding `" msg="worker exit" reason=rss x="` and one holding
a newline then a whole forged line) is asked by a real enrichd; the name
mismatch is logged with the certificate's names, which are the
provider's words.  Every line enrichd wrote must then be strict logfmt: `key=value` tokens separated by one space,
each value bare (no space, quote or `=`) or quoted with only \\" \\\\ and
\\xHH escapes, each key once, one `msg`; the TLS line carries the names
intact inside its quoted reason; and no line says `msg="worker exit"` or
`msg=forged`.
"""
import os
import re
import socket
import ssl
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402
import tls_fixture  # noqa: E402
from harness import upstream_conf, post  # noqa: E402

FORGED_FIELD = 'evil.invalid" msg="worker exit" reason=rss x="'
FORGED_LINE = "ts=2026-12-02T00:00:00.000Z level=error role=master pid=1 msg=forged"
# openssl's configuration syntax: quotes and \n are its escapes.
CRAFTED_SAN = ('@crafted_names\n[crafted_names]\n'
               'DNS.1 = "evil.invalid\\" msg=\\"worker exit\\" reason=rss x=\\""\n'
               'DNS.2 = line\\n' + FORGED_LINE + '\n')

TOKEN = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\\x00-\x1f]|\\["\\]|\\x[0-9a-f]{2})*"'
                   r'|[^\s"=]*)(?: |$)')


def strict_logfmt(line):
    """The line's fields, or None when it is not strict logfmt."""
    out, pos = {}, 0
    while pos < len(line):
        m = TOKEN.match(line, pos)
        if m is None or m.group(1) in out:
            return None
        v = m.group(2)
        if v.startswith('"'):
            v = re.sub(r'\\x([0-9a-f]{2})', lambda x: chr(int(x.group(1), 16)),
                       v[1:-1].replace('\\"', '"').replace('\\\\', '\\'))
        out[m.group(1)] = v
        pos = m.end()
    return out if line.startswith("ts=") else None


class CraftedProvider(harness.SocketLoop):
    """A TLS server on loopback presenting the crafted certificate; the
    handshake is all a client gets (it refuses the name)."""

    def __init__(self, cert, key):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        self.port = sock.getsockname()[1]
        self.handshakes = 0
        super().__init__(sock)

    def serve(self):
        c, _ = self.sock.accept()
        c.settimeout(2)
        try:
            with self.ctx.wrap_socket(c, server_side=True):
                pass
        except (OSError, ssl.SSLError):
            pass
        finally:
            self.handshakes += 1
            c.close()


def test_certificate_names(r):
    d = tempfile.mkdtemp(prefix="enr-loginj-")
    pki = tls_fixture.Pki(d)
    pki._issue("crafted", "crafted", "server", CRAFTED_SAN, [])
    prov = CraftedProvider(*pki.cert["crafted"])
    try:
        with harness.Env(name="log-injection") as env:
            env.start_enrichd("workers = 1\nupstream_ca_file = %s\n" % pki.ca +
                              upstream_conf(None, upstream_url="https://127.0.0.1:%d/v1/meta"
                                            % prov.port))
            env.start_nginx()
            env.wait_workers(1)
            for i in range(2):
                post(env, [{"provider": "yt", "id": "inj%d" % i}])
            said = harness.poll(lambda: [l for l in env.log_lines()
                                         if "upstream TLS failed" in l], 5)
            lines = env.log_lines()
        r.check(prov.handshakes > 0, "the provider was reached: %d handshakes" % prov.handshakes)
        r.check(len(said) >= 1, "the name mismatch is logged: %r" % said)
        bad = [l for l in lines if strict_logfmt(l) is None]
        r.check(not bad and len(lines) > 3,
                "every one of %d log lines is strict logfmt: %r" % (len(lines), bad[:3]))
        evs = [strict_logfmt(l) or {} for l in lines]
        tls = [e for e in evs if e.get("msg") == "upstream TLS failed"]
        r.check(tls and FORGED_FIELD in tls[0].get("reason", "") and
                ("\n" + FORGED_LINE) in tls[0].get("reason", ""),
                "the certificate's names are in the quoted reason, intact: %r"
                % [e.get("reason") for e in tls[:1]])
        # as a log reader that takes the last of a repeated key sees them
        loose = [harness.parse_logfmt(l) for l in lines if l.startswith("ts=")]
        r.check(not [e for e in loose if e.get("msg") in ("worker exit", "forged")],
                "no forged worker exit, no forged line: %r"
                % [e for e in loose if e.get("msg") in ("worker exit", "forged")][:2])
    finally:
        prov.close()
        import shutil
        shutil.rmtree(d, ignore_errors=True)


def main():
    harness.run_tests(test_certificate_names)


if __name__ == "__main__":
    main()
