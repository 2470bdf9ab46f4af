build-r/obj/upstream/upstream_reply.o: src/upstream/upstream_reply.c \
 src/upstream/upstream_reply.h src/base/buf.h src/base/hash.h
src/upstream/upstream_reply.h:
src/base/buf.h:
src/base/hash.h:
