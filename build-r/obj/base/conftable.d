build-r/obj/base/conftable.o: src/base/conftable.c src/base/config.h \
 src/base/allow.h src/base/secret.h src/base/config_int.h
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/config_int.h:
