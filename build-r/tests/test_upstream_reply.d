build-r/tests/test_upstream_reply.o: tests/unit/test_upstream_reply.c \
 src/base/buf.h tests/unit/t.h src/upstream/upstream_reply.h
src/base/buf.h:
tests/unit/t.h:
src/upstream/upstream_reply.h:
