build-r/tests/test_secret.o: tests/unit/test_secret.c src/base/config.h \
 src/base/allow.h src/base/secret.h tests/unit/t.h
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
tests/unit/t.h:
