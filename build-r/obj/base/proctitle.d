build-r/obj/base/proctitle.o: src/base/proctitle.c src/base/proctitle.h
src/base/proctitle.h:
