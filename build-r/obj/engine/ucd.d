build-r/obj/engine/ucd.o: src/engine/ucd.c src/engine/ucd.h \
 src/engine/wtf8.h src/base/buf.h src/engine/ucd_tables.inc
src/engine/ucd.h:
src/engine/wtf8.h:
src/base/buf.h:
src/engine/ucd_tables.inc:
