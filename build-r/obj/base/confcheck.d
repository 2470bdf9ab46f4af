build-r/obj/base/confcheck.o: src/base/confcheck.c src/base/confcheck.h \
 src/base/config.h src/base/allow.h src/base/secret.h
src/base/confcheck.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
