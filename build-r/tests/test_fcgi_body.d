build-r/tests/test_fcgi_body.o: tests/unit/test_fcgi_body.c \
 src/fcgi/fcgi_body.h src/base/buf.h src/fcgi/fcgi_guard.h tests/unit/t.h
src/fcgi/fcgi_body.h:
src/base/buf.h:
src/fcgi/fcgi_guard.h:
tests/unit/t.h:
