build-r/obj/base/signals.o: src/base/signals.c src/base/signals.h \
 src/base/clock.h src/base/log.h
src/base/signals.h:
src/base/clock.h:
src/base/log.h:
