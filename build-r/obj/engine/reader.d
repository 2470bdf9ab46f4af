build-r/obj/engine/reader.o: src/engine/reader.c src/engine/reader.h \
 src/base/buf.h src/engine/lex.h src/engine/contract.h \
 src/engine/jstring.h src/engine/scan.h src/engine/numfmt.h
src/engine/reader.h:
src/base/buf.h:
src/engine/lex.h:
src/engine/contract.h:
src/engine/jstring.h:
src/engine/scan.h:
src/engine/numfmt.h:
