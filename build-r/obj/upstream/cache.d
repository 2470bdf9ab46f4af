build-r/obj/upstream/cache.o: src/upstream/cache.c src/upstream/cache.h \
 src/base/hash.h
src/upstream/cache.h:
src/base/hash.h:
