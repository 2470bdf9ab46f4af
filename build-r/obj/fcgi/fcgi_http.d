build-r/obj/fcgi/fcgi_http.o: src/fcgi/fcgi_http.c src/fcgi/fcgi_http.h \
 src/base/text.h src/fcgi/fcgi_stream.h
src/fcgi/fcgi_http.h:
src/base/text.h:
src/fcgi/fcgi_stream.h:
