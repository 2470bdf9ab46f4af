build-r/tests/test_unicode.o: tests/unit/test_unicode.c tests/unit/t.h \
 src/engine/unicode.h src/base/buf.h src/engine/wtf8.h
tests/unit/t.h:
src/engine/unicode.h:
src/base/buf.h:
src/engine/wtf8.h:
