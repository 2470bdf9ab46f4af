build-r/obj/ops/statustext.o: src/ops/statustext.c src/ops/statustext.h \
 src/base/buf.h
src/ops/statustext.h:
src/base/buf.h:
