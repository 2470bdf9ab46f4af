build-r/obj/base/scoreboard.o: src/base/scoreboard.c \
 src/base/scoreboard.h
src/base/scoreboard.h:
