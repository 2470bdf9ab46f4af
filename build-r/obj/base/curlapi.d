build-r/obj/base/curlapi.o: src/base/curlapi.c src/base/curlapi.h
src/base/curlapi.h:
