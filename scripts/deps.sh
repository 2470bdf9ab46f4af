#!/bin/sh
# deps.sh: installs the Debian 12 packages that the build, the tests and
# `make run` need, only those missing.  `apt-get update` runs only when
# something must be installed, so on a ready machine this is a no-op.
set -eu

# What building and serving need (`make run`), then what the tests add
# (`make test`, CI): sanitizer runtimes and libFuzzer, valgrind, linters,
# systemd's tools for the unit checks, promtool for /metrics, cgi-fcgi
# (libfcgi-bin) as a second FastCGI client, Apache (apache2-bin: the
# server and its modules, no service, no site) and lighttpd as front ends
# besides nginx, for the fleet test Prometheus itself, curl and ip
# (network namespaces), openssl (the TLS tests make their certificates
# with it), and the Unicode oracles: ICU (the unit tests) and Node
# (tests/unicode/, which needs a Node whose ICU has the tables' Unicode
# version and says so if not), and for the status page and `enrichd
# status --watch` a headless Chromium and tmux, and PHP with SQLite and
# curl, the pipeline's own stack, to run docs/rejected.md's importer;
# strace counts a worker's system calls per request (test_syscalls.py);
# readelf (binutils) reads enrichd's relocations (test_pool_systemd.py)
# and what -t/-T read; gdb's gcore takes the cores test_secret_memory.py
# searches for the provider secret; pyflakes checks the tests' and
# scripts' Python in `make lint`; redis-server is the fleet's shared
# store, started by the store's tests on a socket of their own (the
# package's own service is stopped and disabled below, as lighttpd's).
RUN_PKGS="gcc libfcgi-dev libjson-c-dev libssl-dev libcurl4-openssl-dev libsystemd-dev
libhiredis-dev nginx-light pkg-config python3"
TEST_PKGS="systemd clang libclang-rt-14-dev valgrind cppcheck clang-format prometheus
libfcgi-bin apache2-bin lighttpd curl iproute2 groff-base man-db openssl libicu-dev nodejs chromium tmux
php-cli php-sqlite3 php-curl strace gdb binutils python3-pyflakes redis-server"
# `make deb`: debhelper and lintian; `make system-test`: a Debian root
# file system booted under systemd-nspawn.
DEB_PKGS="debhelper lintian fakeroot dpkg-dev"
SYSTEM_PKGS="debootstrap systemd-container"
case "${1:-test}" in
run) PKGS=$RUN_PKGS ;;
test) PKGS="$RUN_PKGS $TEST_PKGS" ;;
deb) PKGS="$RUN_PKGS $DEB_PKGS" ;;
system) PKGS="$RUN_PKGS $DEB_PKGS $SYSTEM_PKGS" ;;
*) echo "usage: deps.sh [run|test|deb|system]" >&2; exit 2 ;;
esac

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=sudo
    else
        echo "deps: not root and no sudo; install as root:$missing" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing

# The tests start lighttpd themselves, on loopback ports of their own;
# the package enables and starts a system service on port 80 (where a
# policy-rc.d allows it).  Installed here for the tests, it is stopped
# and disabled at once, so it never holds port 80 on a CI machine or
# starts at the next boot.  A lighttpd that was already installed is
# left as it is.
case " $missing " in
*" lighttpd "*)
    if [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now lighttpd.service >/dev/null 2>&1 || true
    else
        $SUDO invoke-rc.d lighttpd stop >/dev/null 2>&1 || true
        $SUDO update-rc.d lighttpd disable >/dev/null 2>&1 || true
    fi
    echo "deps: lighttpd's own service stopped and disabled (the tests run their own)" >&2
    ;;
esac
case " $missing " in
*" redis-server "*)
    if [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now redis-server.service >/dev/null 2>&1 || true
    else
        $SUDO invoke-rc.d redis-server stop >/dev/null 2>&1 || true
        $SUDO update-rc.d redis-server disable >/dev/null 2>&1 || true
    fi
    echo "deps: redis-server's own service stopped and disabled (the tests run their own)" >&2
    ;;
esac
