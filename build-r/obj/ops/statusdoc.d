build-r/obj/ops/statusdoc.o: src/ops/statusdoc.c src/ops/statusdoc.h \
 src/base/buf.h src/base/config.h src/base/allow.h src/base/secret.h \
 src/ops/health.h src/base/scoreboard.h src/base/sockdiag.h \
 src/ops/statustext.h src/upstream/cache.h src/upstream/breaker.h \
 src/base/clock.h
src/ops/statusdoc.h:
src/base/buf.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/ops/health.h:
src/base/scoreboard.h:
src/base/sockdiag.h:
src/ops/statustext.h:
src/upstream/cache.h:
src/upstream/breaker.h:
src/base/clock.h:
