/*
 * curlapi.h: libcurl, loaded at run time and only when it is needed.
 *
 * libcurl drags ~30 shared libraries (LDAP, Kerberos, SSH, RTMP...) into
 * any process that links it: 17 ms of dynamic loading before main() on
 * this machine, four times everything else enrichd does before it serves.
 * Enrichment is off unless upstream_url is set, so the daemon loads
 * libcurl with dlopen() when (and only when) a configuration enables it,
 * in the master before the workers fork, so it is mapped once.
 *
 * Files that call libcurl include this header and call the curl_*
 * functions by their own names, with libcurl's type checks on
 * (curl_easy_setopt and friends are checked by <curl/typecheck-gcc.h>).
 * The program is not linked with libcurl: curlapi.c defines each curl_*
 * function it uses as a small forwarder to the symbol dlopen() found.
 * Calling one before a successful enr_curl_load() is a bug; it aborts
 * with the function's name instead of jumping through NULL.
 */
#ifndef ENR_CURLAPI_H
#define ENR_CURLAPI_H

#include <stddef.h>

#include <curl/curl.h>

/* Loads libcurl.so.4 and resolves every function curlapi.c forwards;
 * idempotent.  Returns 0, or -1 with the reason in err. */
int enr_curl_load(char *err, size_t errlen);

/* libcurl's CA bundle and directory as built, "" for one it names none
 * (which of them a worker trusts: trust_setup() in upconn.c); -1 when
 * libcurl cannot be asked.  After enr_curl_load(). */
int enr_curl_ca_defaults(char *bundle, size_t blen, char *dir, size_t dlen);

#endif
