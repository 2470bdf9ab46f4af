build-r/obj/engine/numfmt.o: src/engine/numfmt.c src/engine/numfmt.h \
 src/base/text.h
src/engine/numfmt.h:
src/base/text.h:
