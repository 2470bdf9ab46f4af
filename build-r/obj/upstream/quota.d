build-r/obj/upstream/quota.o: src/upstream/quota.c src/upstream/quota.h \
 src/base/scoreboard.h src/base/clock.h src/base/log.h
src/upstream/quota.h:
src/base/scoreboard.h:
src/base/clock.h:
src/base/log.h:
