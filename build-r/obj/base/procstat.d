build-r/obj/base/procstat.o: src/base/procstat.c src/base/procstat.h
src/base/procstat.h:
