build-r/obj/upstream/upconn.o: src/upstream/upconn.c \
 src/upstream/upconn.h src/base/config.h src/base/allow.h \
 src/base/secret.h src/base/curlapi.h src/base/clock.h src/base/log.h
src/upstream/upconn.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/curlapi.h:
src/base/clock.h:
src/base/log.h:
