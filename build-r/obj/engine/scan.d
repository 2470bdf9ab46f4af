build-r/obj/engine/scan.o: src/engine/scan.c src/engine/scan.h
src/engine/scan.h:
