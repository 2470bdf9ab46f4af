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
 * Files that call libcurl include this header instead of <curl/curl.h>;
 * the curl_* names they use become calls through enr_curl, so their code
 * reads as ordinary libcurl code.  Calling one before a successful
 * enr_curl_load() is a bug (the pointers are NULL).
 */
#ifndef ENR_CURLAPI_H
#define ENR_CURLAPI_H

#include <stddef.h>

#define CURL_DISABLE_TYPECHECK /* the type-checking macros would name the real symbols */
#include <curl/curl.h>

struct enr_curl_api {
    CURLcode (*global_init)(long flags);
    void (*global_cleanup)(void);
    char *(*version)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    CURLcode (*easy_perform)(CURL *h);
    const char *(*easy_strerror)(CURLcode rc);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *m);
    CURLMcode (*multi_setopt)(CURLM *m, CURLMoption opt, ...);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_perform)(CURLM *m, int *running);
    CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd *extra, unsigned n, int timeout_ms,
                            int *numfds);
    CURLMsg *(*multi_info_read)(CURLM *m, int *left);
    const char *(*multi_strerror)(CURLMcode rc);
    CURLU *(*url)(void);
    void (*url_cleanup)(CURLU *u);
    CURLUcode (*url_set)(CURLU *u, CURLUPart part, const char *content, unsigned flags);
    CURLUcode (*url_get)(const CURLU *u, CURLUPart part, char **content, unsigned flags);
    void (*free)(void *p);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
};

extern struct enr_curl_api enr_curl;

/* Loads libcurl.so.4 and resolves every entry of enr_curl; idempotent.
 * Returns 0, or -1 with the reason in err. */
int enr_curl_load(char *err, size_t errlen);

#ifndef ENR_CURLAPI_IMPL
#undef curl_global_init
#define curl_global_init enr_curl.global_init
#undef curl_global_cleanup
#define curl_global_cleanup enr_curl.global_cleanup
#undef curl_version
#define curl_version enr_curl.version
#undef curl_easy_init
#define curl_easy_init enr_curl.easy_init
#undef curl_easy_cleanup
#define curl_easy_cleanup enr_curl.easy_cleanup
#undef curl_easy_setopt
#define curl_easy_setopt enr_curl.easy_setopt
#undef curl_easy_getinfo
#define curl_easy_getinfo enr_curl.easy_getinfo
#undef curl_easy_perform
#define curl_easy_perform enr_curl.easy_perform
#undef curl_easy_strerror
#define curl_easy_strerror enr_curl.easy_strerror
#undef curl_multi_init
#define curl_multi_init enr_curl.multi_init
#undef curl_multi_cleanup
#define curl_multi_cleanup enr_curl.multi_cleanup
#undef curl_multi_setopt
#define curl_multi_setopt enr_curl.multi_setopt
#undef curl_multi_add_handle
#define curl_multi_add_handle enr_curl.multi_add_handle
#undef curl_multi_remove_handle
#define curl_multi_remove_handle enr_curl.multi_remove_handle
#undef curl_multi_perform
#define curl_multi_perform enr_curl.multi_perform
#undef curl_multi_poll
#define curl_multi_poll enr_curl.multi_poll
#undef curl_multi_info_read
#define curl_multi_info_read enr_curl.multi_info_read
#undef curl_multi_strerror
#define curl_multi_strerror enr_curl.multi_strerror
#undef curl_url
#define curl_url enr_curl.url
#undef curl_url_cleanup
#define curl_url_cleanup enr_curl.url_cleanup
#undef curl_url_set
#define curl_url_set enr_curl.url_set
#undef curl_url_get
#define curl_url_get enr_curl.url_get
#undef curl_free
#define curl_free enr_curl.free
#undef curl_slist_append
#define curl_slist_append enr_curl.slist_append
#undef curl_slist_free_all
#define curl_slist_free_all enr_curl.slist_free_all
#endif

#endif
