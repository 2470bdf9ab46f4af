/*
 * fuzz_api_youtube.c: libFuzzer target on the YouTube reader and classifier
 * (src/upstream/api_youtube.c); what it checks: fuzz_api.h.
 */
#define FUZZ_API ENR_API_YOUTUBE
#define FUZZ_YOUTUBE
#include "fuzz_api.h"
