build-r/tests/test_numfmt.o: tests/unit/test_numfmt.c src/engine/numfmt.h \
 tests/unit/t.h tests/unit/numfmt_cases.inc
src/engine/numfmt.h:
tests/unit/t.h:
tests/unit/numfmt_cases.inc:
