build-r/tests/test_cache.o: tests/unit/test_cache.c src/upstream/cache.h \
 tests/unit/t.h
src/upstream/cache.h:
tests/unit/t.h:
