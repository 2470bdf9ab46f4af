build-r/tests/test_allow.o: tests/unit/test_allow.c src/base/allow.h \
 src/base/config.h src/base/secret.h tests/unit/t.h
src/base/allow.h:
src/base/config.h:
src/base/secret.h:
tests/unit/t.h:
