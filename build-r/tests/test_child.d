build-r/tests/test_child.o: tests/unit/test_child.c src/pool/child.h \
 src/base/config.h src/base/allow.h src/base/secret.h \
 src/base/scoreboard.h tests/unit/t.h
src/pool/child.h:
src/base/config.h:
src/base/allow.h:
src/base/secret.h:
src/base/scoreboard.h:
tests/unit/t.h:
