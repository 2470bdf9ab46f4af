"""frontends.py: the other FastCGI front ends, Apache (mod_proxy_fcgi)
and lighttpd, for the tests.

Used as `import frontends` next to `import harness`.
"""
import os
import shutil
import socket
import subprocess

from harness import IS_ROOT, NGINX_TOKENS, ROOT, Env, free_port, render_site, wait_for

# Each runs its shipped site (conf/apache/enrichd.conf,
# conf/lighttpd/enrichd.conf) with its deployment strings substituted, as
# start_nginx() does, under a generated top-level configuration, as a
# foreground process in its own session on a free loopback port; it is
# one of env.procs, so Env.close() kills it.  env.port stays nginx's.


class FrontEnd:
    """A started front end: name, proc, port, dir (its logs), and
    request(), the same client as Env.request(), to this front end."""

    def __init__(self, name, proc, port, d):
        self.name, self.proc, self.port, self.dir = name, proc, port, d

    request = Env.request

    def error_log(self):
        return _tail(os.path.join(self.dir, "error.log")) + _tail(os.path.join(self.dir, "stderr.log"))


APACHE_CONF = os.path.join(ROOT, "conf", "apache", "enrichd.conf")
# The same deployment strings as nginx's site, but for the access log.
APACHE_TOKENS = dict(NGINX_TOKENS, access_log="/var/log/apache2/enrichd.access.log")
APACHE_BIN = "/usr/sbin/apache2"
APACHE_MODULES_DIR = "/usr/lib/apache2/modules"
# What the site needs besides Debian's built-in modules (mod_unixd,
# mod_log_config): the ones `a2enmod` would enable.
APACHE_MODULES = ("mpm_event", "authz_core", "authz_host", "proxy", "proxy_fcgi", "headers",
                  "unique_id")
LIGHTTPD_CONF = os.path.join(ROOT, "conf", "lighttpd", "enrichd.conf")
LIGHTTPD_TOKENS = dict(NGINX_TOKENS, access_log="/var/log/lighttpd/enrichd.access.log")
LIGHTTPD_BIN = "/usr/sbin/lighttpd"


def _frontend_dir(env, name):
    """env.dir/name, writable by the front end's user (its logs, pid
    file, spooled bodies)."""
    d = os.path.join(env.dir, name)
    os.makedirs(d, exist_ok=True)
    if IS_ROOT:
        shutil.chown(d, user="www-data", group="www-data")
    return d


def _frontend_site(env, name, conf, tokens, site_edit):
    """The front end's folder, a free port, and its shipped site (conf)
    rendered for env there, through site_edit(text) when given."""
    d = _frontend_dir(env, name)
    with open(conf) as f:
        text = f.read()
    port = free_port()
    text = render_site(text, tokens, {
        "listen": "127.0.0.1:%d" % port, "fastcgi": env.sock, "status": env.status_sock,
        "access_log": os.path.join(d, "access.log")}, os.path.relpath(conf, ROOT))
    if site_edit is not None:
        text = site_edit(text)
    site = os.path.join(d, "enrichd-site.conf")
    with open(site, "w") as f:
        f.write(text)
    return d, port, site


def _start_frontend(env, top, lines, argv, port, d, what):
    """Writes the top-level configuration (lines) to top, then runs argv
    as www-data when the tests run as root (no process of it is
    privileged: the port is above 1024 and its files are in d)."""
    with open(top, "w") as f:
        f.write("\n".join(lines) + "\n")
    log = os.path.join(d, "stderr.log")
    who = dict(user="www-data", group="www-data", extra_groups=[]) if IS_ROOT else {}
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "ab"),
                         start_new_session=True, **who)
    env.procs.append(p)

    def up():
        if p.poll() is not None:
            raise RuntimeError("%s exited %s: %s" % (what, p.returncode, _tail(log)))
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            return False
    wait_for(up, 10, what=what + " port")
    return FrontEnd(what, p, port, d)


def _tail(path, n=2000):
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def start_apache(env, site_edit=None):
    """Apache 2.4 with conf/apache/enrichd.conf in front of env's sockets,
    on a free port: a FrontEnd.  site_edit(text) may change the site
    (its deployment strings substituted) first."""
    d, port, site = _frontend_site(env, "apache", APACHE_CONF, APACHE_TOKENS, site_edit)
    top = os.path.join(d, "httpd.conf")
    lines = ["ServerRoot %s" % d, "DefaultRuntimeDir %s" % d, "PidFile %s/httpd.pid" % d,
             "ErrorLog %s/error.log" % d, "LogLevel warn", "Mutex file:%s default" % d,
             "ServerName localhost"]
    lines += ["LoadModule %s_module %s/mod_%s.so" % (m, APACHE_MODULES_DIR, m)
              for m in APACHE_MODULES]
    # One child of 25 threads, a second when busy: enough for the tests'
    # concurrent clients, small on a 2-core machine.
    lines += ["StartServers 1", "ServerLimit 2", "ThreadsPerChild 25",
              "MaxRequestWorkers 50", "MinSpareThreads 1", "MaxSpareThreads 50",
              "Include %s" % site]
    return _start_frontend(env, top, lines, [APACHE_BIN, "-f", top, "-DFOREGROUND"], port, d,
                           "apache")


def start_lighttpd(env, site_edit=None):
    """lighttpd 1.4 with conf/lighttpd/enrichd.conf in front of env's
    sockets, on a free port: a FrontEnd (site_edit as start_apache's)."""
    d, port, site = _frontend_site(env, "lighttpd", LIGHTTPD_CONF, LIGHTTPD_TOKENS, site_edit)
    top = os.path.join(d, "lighttpd.conf")
    # The main listener (Debian's is port 80) on a unix socket nobody
    # uses: the site serves on its own $SERVER["socket"].
    lines = ['server.document-root = "%s"' % d, 'server.bind = "%s/unused.sock"' % d,
             'server.pid-file = "%s/lighttpd.pid"' % d, 'server.errorlog = "%s/error.log"' % d,
             'server.upload-dirs = ("%s")' % d, 'include "%s"' % site]
    return _start_frontend(env, top, lines, [LIGHTTPD_BIN, "-D", "-f", top], port, d, "lighttpd")
