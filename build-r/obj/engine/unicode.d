build-r/obj/engine/unicode.o: src/engine/unicode.c src/engine/unicode.h \
 src/base/buf.h src/engine/wtf8.h src/base/text.h src/engine/ucd.h
src/engine/unicode.h:
src/base/buf.h:
src/engine/wtf8.h:
src/base/text.h:
src/engine/ucd.h:
