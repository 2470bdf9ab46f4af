build-r/tests/test_metrics.o: tests/unit/test_metrics.c \
 src/upstream/breaker.h src/ops/metrics.h src/base/buf.h \
 src/base/config.h src/base/allow.h src/base/secret.h src/ops/health.h \
 src/base/scoreboard.h src/base/sockdiag.h src/upstream/cache.h \
 src/ops/statusdoc.h src/ops/statustext.h tests/unit/t.h
src/upstream/breaker.h:
src/ops/metrics.h:
src/base/buf.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/ops/health.h:
src/base/scoreboard.h:
src/base/sockdiag.h:
src/upstream/cache.h:
src/ops/statusdoc.h:
src/ops/statustext.h:
tests/unit/t.h:
