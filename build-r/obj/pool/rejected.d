build-r/obj/pool/rejected.o: src/pool/rejected.c src/pool/rejected.h \
 src/engine/engine.h src/base/buf.h src/engine/contract.h
src/pool/rejected.h:
src/engine/engine.h:
src/base/buf.h:
src/engine/contract.h:
