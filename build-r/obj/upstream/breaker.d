build-r/obj/upstream/breaker.o: src/upstream/breaker.c \
 src/upstream/breaker.h
src/upstream/breaker.h:
