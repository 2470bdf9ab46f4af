build-r/tests/test_rejected.o: tests/unit/test_rejected.c \
 src/engine/engine.h src/base/buf.h src/engine/contract.h \
 src/pool/rejected.h tests/unit/t.h
src/engine/engine.h:
src/base/buf.h:
src/engine/contract.h:
src/pool/rejected.h:
tests/unit/t.h:
