/*
 * upstream_url.h: whether a value of upstream_url is one the upstream
 * client can use.  The one check: the configuration's validation
 * (`enrichd -t`, HUP: the daemon hands it to the parser with
 * enr_config_set_url_check, config.h) and the worker's client start
 * (upstream_setup.c) call the same function, so a URL a worker would
 * refuse at start is refused before any worker sees it.
 */
#ifndef ENR_UPSTREAM_URL_H
#define ENR_UPSTREAM_URL_H

#include <stddef.h>

/* 0 when url (non-empty) is an absolute http:// or https:// URL with a
 * host, no credentials, no fragment, in printable ASCII, that libcurl
 * parses; *has_query (may be NULL) then says whether it carries a query
 * already.  Otherwise -1 and the problem, without the key name, in why.
 * Loads libcurl (curlapi.h) when it is not loaded yet: a URL that cannot
 * be used because libcurl is missing is refused here too. */
int enr_upstream_url_check(const char *url, int *has_query, char *why, size_t whylen);

#endif
