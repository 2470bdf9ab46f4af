build-r/obj/fcgi/fcgi_guard.o: src/fcgi/fcgi_guard.c \
 src/fcgi/fcgi_guard.h src/base/scoreboard.h
src/fcgi/fcgi_guard.h:
src/base/scoreboard.h:
