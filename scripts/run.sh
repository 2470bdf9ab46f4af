#!/bin/sh
# run.sh (`make run`): enrichd with its built-in configuration plus nginx
# with nginx/enrichd.conf, in the foreground on 127.0.0.1:8080.  Ctrl-C
# stops both (enrichd drains first).
#
# nginx/enrichd.conf is used as is, except for its five deployment
# strings (see its header), substituted the same way as in the tests:
# the operators' server on loopback too (127.0.0.1:$OPS_PORT), not on
# every address of a developer's machine.
# As root the built-in socket paths under /run/enrichd are used; as
# another user a private directory replaces them.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${ENR_BUILD:-build}
case $BUILD in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
RUN=$(mktemp -d /tmp/enrichd-run.XXXXXX)
chmod 755 "$RUN"
PORT=${PORT:-8080}
OPS_PORT=${OPS_PORT:-8084}

if [ "$(id -u)" = 0 ]; then
    mkdir -p /run/enrichd
    SOCK=/run/enrichd/enrichd.sock
    STATUS=/run/enrichd/status.sock
    CONF_ARGS=""
    USER_LINE="user www-data www-data;"
else
    SOCK=$RUN/enrichd.sock
    STATUS=$RUN/status.sock
    printf 'listen = %s\nstatus_listen = %s\nlisten_group =\n' "$SOCK" "$STATUS" >"$RUN/enrichd.conf"
    CONF_ARGS="-c $RUN/enrichd.conf"
    USER_LINE=""
fi

sed -e '/^[[:space:]]*#/b' \
    -e "s|127.0.0.1:8080|127.0.0.1:$PORT|" \
    -e "s|listen 8084;|listen 127.0.0.1:$OPS_PORT;|" \
    -e "s|/run/enrichd/enrichd.sock|$SOCK|" \
    -e "s|/run/enrichd/status.sock|$STATUS|" \
    -e "s|/var/log/nginx/enrichd.access.log|$RUN/access.log|" \
    "$ROOT/nginx/enrichd.conf" >"$RUN/enrichd-site.conf"
cp -r "$ROOT/nginx/snippets" "$RUN/snippets"
cat >"$RUN/nginx.conf" <<NGINX
$USER_LINE
worker_processes 2;
daemon off;
master_process on;
pid $RUN/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
    client_body_temp_path $RUN/body;
    fastcgi_temp_path $RUN/fastcgi;
    proxy_temp_path $RUN/proxy;
    uwsgi_temp_path $RUN/uwsgi;
    scgi_temp_path $RUN/scgi;
    include $RUN/enrichd-site.conf;
}
NGINX

ENRICHD_PID=""
NGINX_PID=""
stop() {
    trap - INT TERM EXIT
    [ -n "$NGINX_PID" ] && kill -QUIT "$NGINX_PID" 2>/dev/null || true
    [ -n "$ENRICHD_PID" ] && kill -TERM "$ENRICHD_PID" 2>/dev/null || true
    [ -n "$ENRICHD_PID" ] && wait "$ENRICHD_PID" 2>/dev/null || true
    [ -n "$NGINX_PID" ] && wait "$NGINX_PID" 2>/dev/null || true
    rm -rf "$RUN"
}
trap stop INT TERM EXIT

# shellcheck disable=SC2086
"$BUILD/enrichd" $CONF_ARGS &
ENRICHD_PID=$!
i=0
while [ ! -S "$SOCK" ] && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
done
nginx -p "$RUN" -c "$RUN/nginx.conf" -e stderr &
NGINX_PID=$!
echo "enrichd: serving http://127.0.0.1:$PORT/ (POST / or /v1/enrich; GET /healthz /status /metrics, also on the operators' server http://127.0.0.1:$OPS_PORT/); Ctrl-C stops" >&2
wait "$ENRICHD_PID" || true
