build-r/tests/test_breaker.o: tests/unit/test_breaker.c \
 src/upstream/breaker.h tests/unit/t.h
src/upstream/breaker.h:
tests/unit/t.h:
