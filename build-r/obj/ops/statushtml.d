build-r/obj/ops/statushtml.o: src/ops/statushtml.c src/ops/statushtml.h \
 src/base/buf.h src/base/scoreboard.h src/ops/health.h src/base/config.h \
 src/base/allow.h src/base/secret.h
src/ops/statushtml.h:
src/base/buf.h:
src/base/scoreboard.h:
src/ops/health.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
