build-r/obj/base/sockdiag.o: src/base/sockdiag.c src/base/sockdiag.h
src/base/sockdiag.h:
