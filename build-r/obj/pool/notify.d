build-r/obj/pool/notify.o: src/pool/notify.c src/pool/notify.h \
 src/base/log.h
src/pool/notify.h:
src/base/log.h:
