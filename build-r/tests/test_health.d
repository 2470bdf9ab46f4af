build-r/tests/test_health.o: tests/unit/test_health.c src/base/clock.h \
 src/upstream/breaker.h src/ops/health.h src/base/config.h \
 src/base/allow.h src/base/secret.h src/base/scoreboard.h \
 src/base/sockdiag.h tests/unit/t.h
src/base/clock.h:
src/upstream/breaker.h:
src/ops/health.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/scoreboard.h:
src/base/sockdiag.h:
tests/unit/t.h:
