build-r/obj/engine/engine.o: src/engine/engine.c src/engine/engine.h \
 src/base/buf.h src/engine/contract.h src/engine/engine_int.h \
 src/engine/reader.h src/engine/lex.h src/engine/jstring.h \
 src/engine/scan.h src/engine/unicode.h src/engine/wtf8.h \
 src/engine/numfmt.h src/base/text.h
src/engine/engine.h:
src/base/buf.h:
src/engine/contract.h:
src/engine/engine_int.h:
src/engine/reader.h:
src/engine/lex.h:
src/engine/jstring.h:
src/engine/scan.h:
src/engine/unicode.h:
src/engine/wtf8.h:
src/engine/numfmt.h:
src/base/text.h:
