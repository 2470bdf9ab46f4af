build-r/cmd/bench-null.o: src/cmd/bench-null.c src/base/buf.h \
 src/fcgi/fcgi_body.h src/fcgi/fcgi_guard.h src/fcgi/fcgi_conn.h \
 src/base/allow.h src/base/scoreboard.h src/fcgi/fcgi_stream.h
src/base/buf.h:
src/fcgi/fcgi_body.h:
src/fcgi/fcgi_guard.h:
src/fcgi/fcgi_conn.h:
src/base/allow.h:
src/base/scoreboard.h:
src/fcgi/fcgi_stream.h:
