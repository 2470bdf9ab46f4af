build-r/obj/pool/reload.o: src/pool/reload.c src/pool/reload.h \
 src/pool/master_state.h src/pool/child.h src/base/config.h \
 src/base/allow.h src/base/secret.h src/ops/health.h \
 src/base/scoreboard.h src/upstream/cache.h src/base/clock.h \
 src/base/log.h src/pool/notify.h src/pool/worker.h src/upstream/quota.h
src/pool/reload.h:
src/pool/master_state.h:
src/pool/child.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/ops/health.h:
src/base/scoreboard.h:
src/upstream/cache.h:
src/base/clock.h:
src/base/log.h:
src/pool/notify.h:
src/pool/worker.h:
src/upstream/quota.h:
