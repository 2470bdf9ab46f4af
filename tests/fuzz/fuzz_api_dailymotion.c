/*
 * fuzz_api_dailymotion.c: libFuzzer target on the Dailymotion reader and classifier
 * (src/upstream/api_dailymotion.c); what it checks: fuzz_api.h.
 */
#define FUZZ_API ENR_API_DAILYMOTION
#define FUZZ_DAILYMOTION
#include "fuzz_api.h"
