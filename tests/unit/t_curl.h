/*
 * t_curl.h: the start of a test that drives the upstream client through
 * libcurl: the library loaded as the daemon loads it (curlapi.h), its
 * global state made, stdout line-buffered (a killed test keeps what it
 * printed) and the client's debug log when ENR_TEST_DEBUG is set.
 */
#ifndef ENR_T_CURL_H
#define ENR_T_CURL_H

#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "upstream/curlapi.h"

/* 0, or -1 once the failure lines tests/run.py reads are printed: the
 * caller returns 1. */
static inline int t_curl_start(void)
{
    char lerr[256];

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (enr_curl_load(lerr, sizeof lerr) != 0) {
        printf("FAIL %s\n0 passed, 1 failed\n", lerr);
        return -1;
    }
    if (getenv("ENR_TEST_DEBUG"))
        enr_log_set_level(ENR_LOG_DEBUG);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

#endif
