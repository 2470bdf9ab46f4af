build-r/obj/pool/master.o: src/pool/master.c src/pool/master.h \
 src/base/config.h src/base/allow.h src/base/secret.h src/pool/child.h \
 src/ops/health.h src/base/scoreboard.h src/fcgi/listen.h \
 src/base/proctitle.h src/base/log.h src/pool/master_state.h \
 src/upstream/cache.h src/pool/notify.h src/base/procstat.h \
 src/pool/reload.h src/base/signals.h src/ops/status.h src/pool/worker.h \
 src/base/clock.h
src/pool/master.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/pool/child.h:
src/ops/health.h:
src/base/scoreboard.h:
src/fcgi/listen.h:
src/base/proctitle.h:
src/base/log.h:
src/pool/master_state.h:
src/upstream/cache.h:
src/pool/notify.h:
src/base/procstat.h:
src/pool/reload.h:
src/base/signals.h:
src/ops/status.h:
src/pool/worker.h:
src/base/clock.h:
