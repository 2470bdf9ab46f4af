build-r/tests/test_config.o: tests/unit/test_config.c src/base/config.h \
 src/base/allow.h src/base/secret.h src/base/confcheck.h tests/unit/t.h
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/confcheck.h:
tests/unit/t.h:
