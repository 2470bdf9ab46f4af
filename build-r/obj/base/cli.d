build-r/obj/base/cli.o: src/base/cli.c src/base/cli.h
src/base/cli.h:
