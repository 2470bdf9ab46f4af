build-r/obj/base/secret.o: src/base/secret.c src/base/secret.h
src/base/secret.h:
