build-r/tests/test_fcgi_child.o: tests/unit/test_fcgi_child.c \
 src/fcgi/fcgi_child.h src/base/signals.h tests/unit/t.h
src/fcgi/fcgi_child.h:
src/base/signals.h:
tests/unit/t.h:
