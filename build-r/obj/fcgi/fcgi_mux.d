build-r/obj/fcgi/fcgi_mux.o: src/fcgi/fcgi_mux.c src/fcgi/fcgi_mux.h \
 src/base/buf.h src/fcgi/fcgi_conn.h src/base/allow.h \
 src/base/scoreboard.h src/fcgi/fcgi_body.h src/fcgi/fcgi_guard.h \
 src/base/clock.h src/base/log.h src/base/signals.h
src/fcgi/fcgi_mux.h:
src/base/buf.h:
src/fcgi/fcgi_conn.h:
src/base/allow.h:
src/base/scoreboard.h:
src/fcgi/fcgi_body.h:
src/fcgi/fcgi_guard.h:
src/base/clock.h:
src/base/log.h:
src/base/signals.h:
