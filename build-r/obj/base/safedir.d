build-r/obj/base/safedir.o: src/base/safedir.c src/base/safedir.h
src/base/safedir.h:
