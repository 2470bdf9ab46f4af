build-r/obj/base/upstream_url.o: src/base/upstream_url.c \
 src/base/upstream_url.h src/base/curlapi.h src/base/secret.h
src/base/upstream_url.h:
src/base/curlapi.h:
src/base/secret.h:
