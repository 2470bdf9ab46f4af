build-r/tests/test_quota.o: tests/unit/test_quota.c src/base/clock.h \
 src/base/log.h src/upstream/quota.h src/base/scoreboard.h tests/unit/t.h
src/base/clock.h:
src/base/log.h:
src/upstream/quota.h:
src/base/scoreboard.h:
tests/unit/t.h:
