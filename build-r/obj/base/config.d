build-r/obj/base/config.o: src/base/config.c src/base/config.h \
 src/base/allow.h src/base/secret.h src/base/config_int.h \
 src/base/confhint.h src/base/safedir.h src/base/sockaddr.h \
 src/base/upstream_url.h
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/config_int.h:
src/base/confhint.h:
src/base/safedir.h:
src/base/sockaddr.h:
src/base/upstream_url.h:
