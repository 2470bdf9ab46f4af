build-r/obj/engine/wtf8.o: src/engine/wtf8.c src/engine/wtf8.h \
 src/base/buf.h src/base/text.h
src/engine/wtf8.h:
src/base/buf.h:
src/base/text.h:
