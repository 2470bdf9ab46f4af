build-r/tests/test_procstat.o: tests/unit/test_procstat.c \
 src/base/procstat.h tests/unit/t.h
src/base/procstat.h:
tests/unit/t.h:
