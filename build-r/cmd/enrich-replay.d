build-r/cmd/enrich-replay.o: src/cmd/enrich-replay.c src/base/cli.h \
 src/replay/replay_http.h src/replay/replay_stats.h \
 src/replay/replay_trace.h
src/base/cli.h:
src/replay/replay_http.h:
src/replay/replay_stats.h:
src/replay/replay_trace.h:
