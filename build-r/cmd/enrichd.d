build-r/cmd/enrichd.o: src/cmd/enrichd.c src/base/cli.h src/base/config.h \
 src/base/allow.h src/base/secret.h src/base/confcheck.h \
 src/base/curlapi.h src/base/log.h src/base/proctitle.h src/pool/master.h \
 src/ops/status.h src/base/scoreboard.h src/upstream/cache.h \
 src/engine/unicode.h src/base/buf.h src/engine/wtf8.h
src/base/cli.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/confcheck.h:
src/base/curlapi.h:
src/base/log.h:
src/base/proctitle.h:
src/pool/master.h:
src/ops/status.h:
src/base/scoreboard.h:
src/upstream/cache.h:
src/engine/unicode.h:
src/base/buf.h:
src/engine/wtf8.h:
