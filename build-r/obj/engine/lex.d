build-r/obj/engine/lex.o: src/engine/lex.c src/engine/lex.h \
 src/base/buf.h src/engine/contract.h src/engine/jstring.h \
 src/engine/scan.h
src/engine/lex.h:
src/base/buf.h:
src/engine/contract.h:
src/engine/jstring.h:
src/engine/scan.h:
