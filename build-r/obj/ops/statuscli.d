build-r/obj/ops/statuscli.o: src/ops/statuscli.c src/ops/status.h \
 src/base/config.h src/base/allow.h src/base/secret.h \
 src/base/scoreboard.h src/upstream/cache.h src/base/buf.h \
 src/base/clock.h src/ops/statustext.h
src/ops/status.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/scoreboard.h:
src/upstream/cache.h:
src/base/buf.h:
src/base/clock.h:
src/ops/statustext.h:
