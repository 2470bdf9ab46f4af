build-r/obj/upstream/upstream.o: src/upstream/upstream.c \
 src/upstream/upstream.h src/base/config.h src/base/allow.h \
 src/base/secret.h src/upstream/cache.h src/upstream/upstream_stats.h \
 src/base/scoreboard.h src/engine/engine.h src/base/buf.h \
 src/engine/contract.h src/upstream/upstream_int.h src/base/curlapi.h \
 src/upstream/breaker.h src/upstream/quota.h src/upstream/upconn.h \
 src/upstream/upstream_reply.h src/base/log.h src/base/clock.h \
 src/base/hash.h
src/upstream/upstream.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/upstream/cache.h:
src/upstream/upstream_stats.h:
src/base/scoreboard.h:
src/engine/engine.h:
src/base/buf.h:
src/engine/contract.h:
src/upstream/upstream_int.h:
src/base/curlapi.h:
src/upstream/breaker.h:
src/upstream/quota.h:
src/upstream/upconn.h:
src/upstream/upstream_reply.h:
src/base/log.h:
src/base/clock.h:
src/base/hash.h:
