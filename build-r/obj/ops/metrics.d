build-r/obj/ops/metrics.o: src/ops/metrics.c src/ops/metrics.h \
 src/base/buf.h src/base/config.h src/base/allow.h src/base/secret.h \
 src/ops/health.h src/base/scoreboard.h src/base/sockdiag.h \
 src/upstream/cache.h src/fcgi/fcgi_guard.h src/upstream/breaker.h \
 src/base/clock.h
src/ops/metrics.h:
src/base/buf.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/ops/health.h:
src/base/scoreboard.h:
src/base/sockdiag.h:
src/upstream/cache.h:
src/fcgi/fcgi_guard.h:
src/upstream/breaker.h:
src/base/clock.h:
