build-r/obj/replay/replay_http.o: src/replay/replay_http.c \
 src/replay/replay_http.h src/replay/replay_stats.h
src/replay/replay_http.h:
src/replay/replay_stats.h:
