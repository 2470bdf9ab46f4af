build-r/obj/base/allow.o: src/base/allow.c src/base/allow.h
src/base/allow.h:
