build-r/obj/fcgi/fcgi_conn.o: src/fcgi/fcgi_conn.c src/fcgi/fcgi_conn.h \
 src/base/allow.h src/base/buf.h src/base/scoreboard.h \
 src/fcgi/fcgi_body.h src/fcgi/fcgi_guard.h src/base/clock.h \
 src/fcgi/fcgi_stream.h src/fcgi/listen.h src/base/config.h \
 src/base/secret.h src/base/log.h src/base/signals.h
src/fcgi/fcgi_conn.h:
src/base/allow.h:
src/base/buf.h:
src/base/scoreboard.h:
src/fcgi/fcgi_body.h:
src/fcgi/fcgi_guard.h:
src/base/clock.h:
src/fcgi/fcgi_stream.h:
src/fcgi/listen.h:
src/base/config.h:
src/base/secret.h:
src/base/log.h:
src/base/signals.h:
