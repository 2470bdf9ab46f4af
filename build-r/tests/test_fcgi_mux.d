build-r/tests/test_fcgi_mux.o: tests/unit/test_fcgi_mux.c \
 src/fcgi/fcgi_mux.h src/base/buf.h src/fcgi/fcgi_conn.h src/base/allow.h \
 src/base/scoreboard.h src/fcgi/fcgi_body.h src/fcgi/fcgi_guard.h \
 tests/unit/t.h
src/fcgi/fcgi_mux.h:
src/base/buf.h:
src/fcgi/fcgi_conn.h:
src/base/allow.h:
src/base/scoreboard.h:
src/fcgi/fcgi_body.h:
src/fcgi/fcgi_guard.h:
tests/unit/t.h:
