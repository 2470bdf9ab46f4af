build-r/tests/test_engine.o: tests/unit/test_engine.c src/base/buf.h \
 src/base/clock.h src/engine/engine.h src/engine/contract.h \
 tests/unit/t.h
src/base/buf.h:
src/base/clock.h:
src/engine/engine.h:
src/engine/contract.h:
tests/unit/t.h:
