build-r/obj/base/confhint.o: src/base/confhint.c src/base/confhint.h
src/base/confhint.h:
