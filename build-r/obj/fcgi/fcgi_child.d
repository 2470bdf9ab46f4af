build-r/obj/fcgi/fcgi_child.o: src/fcgi/fcgi_child.c \
 src/fcgi/fcgi_child.h src/base/signals.h src/base/log.h \
 src/base/proctitle.h
src/fcgi/fcgi_child.h:
src/base/signals.h:
src/base/log.h:
src/base/proctitle.h:
