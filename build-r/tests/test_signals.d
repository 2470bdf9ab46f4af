build-r/tests/test_signals.o: tests/unit/test_signals.c \
 src/base/signals.h tests/unit/t.h
src/base/signals.h:
tests/unit/t.h:
