build-r/obj/replay/replay_stats.o: src/replay/replay_stats.c \
 src/replay/replay_stats.h
src/replay/replay_stats.h:
