build-r/obj/fcgi/listen.o: src/fcgi/listen.c src/fcgi/listen.h \
 src/base/config.h src/base/allow.h src/base/secret.h src/base/log.h \
 src/base/safedir.h src/base/sockaddr.h src/base/sockdiag.h
src/fcgi/listen.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/log.h:
src/base/safedir.h:
src/base/sockaddr.h:
src/base/sockdiag.h:
