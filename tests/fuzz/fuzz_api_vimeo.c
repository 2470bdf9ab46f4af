/*
 * fuzz_api_vimeo.c: libFuzzer target on the Vimeo reader and classifier
 * (src/upstream/api_vimeo.c); what it checks: fuzz_api.h.
 */
#define FUZZ_API ENR_API_VIMEO
#define FUZZ_VIMEO
#include "fuzz_api.h"
