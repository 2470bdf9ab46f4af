build-r/obj/pool/worker.o: src/pool/worker.c src/pool/worker.h \
 src/base/config.h src/base/allow.h src/base/secret.h \
 src/base/scoreboard.h src/upstream/cache.h src/pool/rejected.h \
 src/engine/engine.h src/base/buf.h src/engine/contract.h \
 src/pool/capture.h src/pool/shed.h src/base/curlapi.h \
 src/fcgi/fcgi_body.h src/fcgi/fcgi_guard.h src/fcgi/fcgi_child.h \
 src/base/signals.h src/fcgi/fcgi_conn.h src/fcgi/fcgi_http.h \
 src/fcgi/fcgi_stream.h src/base/log.h src/base/procstat.h \
 src/base/proctitle.h src/upstream/upstream.h \
 src/upstream/upstream_stats.h src/base/clock.h
src/pool/worker.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/scoreboard.h:
src/upstream/cache.h:
src/pool/rejected.h:
src/engine/engine.h:
src/base/buf.h:
src/engine/contract.h:
src/pool/capture.h:
src/pool/shed.h:
src/base/curlapi.h:
src/fcgi/fcgi_body.h:
src/fcgi/fcgi_guard.h:
src/fcgi/fcgi_child.h:
src/base/signals.h:
src/fcgi/fcgi_conn.h:
src/fcgi/fcgi_http.h:
src/fcgi/fcgi_stream.h:
src/base/log.h:
src/base/procstat.h:
src/base/proctitle.h:
src/upstream/upstream.h:
src/upstream/upstream_stats.h:
src/base/clock.h:
