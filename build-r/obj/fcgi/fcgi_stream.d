build-r/obj/fcgi/fcgi_stream.o: src/fcgi/fcgi_stream.c \
 src/fcgi/fcgi_stream.h src/base/clock.h src/fcgi/fcgi_guard.h
src/fcgi/fcgi_stream.h:
src/base/clock.h:
src/fcgi/fcgi_guard.h:
