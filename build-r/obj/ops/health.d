build-r/obj/ops/health.o: src/ops/health.c src/ops/health.h \
 src/base/config.h src/base/allow.h src/base/secret.h \
 src/base/scoreboard.h src/upstream/breaker.h src/base/sockdiag.h \
 src/base/clock.h
src/ops/health.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/scoreboard.h:
src/upstream/breaker.h:
src/base/sockdiag.h:
src/base/clock.h:
