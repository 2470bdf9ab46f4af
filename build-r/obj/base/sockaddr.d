build-r/obj/base/sockaddr.o: src/base/sockaddr.c src/base/sockaddr.h
src/base/sockaddr.h:
