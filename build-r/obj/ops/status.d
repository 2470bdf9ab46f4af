build-r/obj/ops/status.o: src/ops/status.c src/ops/status.h \
 src/base/config.h src/base/allow.h src/base/secret.h \
 src/base/scoreboard.h src/upstream/cache.h src/base/buf.h \
 src/ops/health.h src/base/log.h src/base/proctitle.h src/ops/metrics.h \
 src/base/sockdiag.h src/base/signals.h src/ops/statusdoc.h \
 src/ops/statustext.h src/ops/statushtml.h src/base/clock.h \
 src/fcgi/fcgi_child.h src/fcgi/fcgi_conn.h src/fcgi/fcgi_body.h \
 src/fcgi/fcgi_guard.h src/fcgi/fcgi_http.h src/fcgi/fcgi_mux.h
src/ops/status.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/scoreboard.h:
src/upstream/cache.h:
src/base/buf.h:
src/ops/health.h:
src/base/log.h:
src/base/proctitle.h:
src/ops/metrics.h:
src/base/sockdiag.h:
src/base/signals.h:
src/ops/statusdoc.h:
src/ops/statustext.h:
src/ops/statushtml.h:
src/base/clock.h:
src/fcgi/fcgi_child.h:
src/fcgi/fcgi_conn.h:
src/fcgi/fcgi_body.h:
src/fcgi/fcgi_guard.h:
src/fcgi/fcgi_http.h:
src/fcgi/fcgi_mux.h:
