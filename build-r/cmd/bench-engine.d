build-r/cmd/bench-engine.o: src/cmd/bench-engine.c src/base/buf.h \
 src/base/clock.h src/engine/engine.h src/engine/contract.h
src/base/buf.h:
src/base/clock.h:
src/engine/engine.h:
src/engine/contract.h:
