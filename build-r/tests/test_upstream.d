build-r/tests/test_upstream.o: tests/unit/test_upstream.c \
 src/base/curlapi.h src/engine/engine.h src/base/buf.h \
 src/engine/contract.h src/base/log.h src/upstream/breaker.h \
 tests/unit/t.h src/upstream/upstream.h src/base/config.h \
 src/base/allow.h src/base/secret.h src/upstream/cache.h \
 src/upstream/upstream_stats.h src/base/scoreboard.h
src/base/curlapi.h:
src/engine/engine.h:
src/base/buf.h:
src/engine/contract.h:
src/base/log.h:
src/upstream/breaker.h:
tests/unit/t.h:
src/upstream/upstream.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/upstream/cache.h:
src/upstream/upstream_stats.h:
src/base/scoreboard.h:
