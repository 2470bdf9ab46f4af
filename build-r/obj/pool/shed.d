build-r/obj/pool/shed.o: src/pool/shed.c src/pool/shed.h \
 src/base/config.h src/base/allow.h src/base/secret.h
src/pool/shed.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
