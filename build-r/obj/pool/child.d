build-r/obj/pool/child.o: src/pool/child.c src/pool/child.h \
 src/base/config.h src/base/allow.h src/base/secret.h src/base/log.h \
 src/base/scoreboard.h src/pool/worker.h src/upstream/cache.h \
 src/base/clock.h
src/pool/child.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/log.h:
src/base/scoreboard.h:
src/pool/worker.h:
src/upstream/cache.h:
src/base/clock.h:
