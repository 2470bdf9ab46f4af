build-r/obj/engine/jstring.o: src/engine/jstring.c src/engine/jstring.h \
 src/base/buf.h
src/engine/jstring.h:
src/base/buf.h:
