build-r/tests/test_shed.o: tests/unit/test_shed.c src/pool/shed.h \
 src/base/config.h src/base/allow.h src/base/secret.h tests/unit/t.h
src/pool/shed.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
tests/unit/t.h:
