/*
 * contract.h: the constants of the output contract (docs/engine.md) that
 * more than one module reads: the providers, the regions in output order,
 * the nesting limit.  Both the reader (which recognizes them) and the
 * engine (which prints them) include this file, so neither includes the
 * other's header for them.
 */
#ifndef ENR_CONTRACT_H
#define ENR_CONTRACT_H

enum enr_provider { ENR_PROV_NONE = 0, ENR_PROV_YT, ENR_PROV_VM, ENR_PROV_DM };

#define ENR_REGIONS 8      /* US GB JP KR TW SG VN TH, in output order */
#define ENR_MAX_DEPTH 1000 /* deeper documents are a 400 (docs/engine.md) */

#endif
