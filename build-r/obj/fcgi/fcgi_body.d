build-r/obj/fcgi/fcgi_body.o: src/fcgi/fcgi_body.c src/fcgi/fcgi_body.h \
 src/base/buf.h src/fcgi/fcgi_guard.h src/base/clock.h
src/fcgi/fcgi_body.h:
src/base/buf.h:
src/fcgi/fcgi_guard.h:
src/base/clock.h:
