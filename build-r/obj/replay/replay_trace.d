build-r/obj/replay/replay_trace.o: src/replay/replay_trace.c \
 src/replay/replay_trace.h src/base/text.h
src/replay/replay_trace.h:
src/base/text.h:
