build-r/obj/pool/capture.o: src/pool/capture.c src/pool/capture.h \
 src/base/config.h src/base/allow.h src/base/secret.h \
 src/base/scoreboard.h src/base/buf.h src/base/clock.h src/base/log.h \
 src/base/safedir.h
src/pool/capture.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/scoreboard.h:
src/base/buf.h:
src/base/clock.h:
src/base/log.h:
src/base/safedir.h:
