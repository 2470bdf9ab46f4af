build-r/cmd/enrich.o: src/cmd/enrich.c src/base/buf.h src/base/clock.h \
 src/engine/engine.h src/engine/contract.h
src/base/buf.h:
src/base/clock.h:
src/engine/engine.h:
src/engine/contract.h:
