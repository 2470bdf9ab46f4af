/*
 * curlapi.c: the libcurl functions enrichd calls, resolved at run time
 * (curlapi.h says why).  Each curl_* function below has libcurl's own
 * prototype (the compiler checks it against <curl/curl.h>) and forwards
 * to the symbol found by dlopen(); the executable does not export them,
 * so libcurl's own internal calls never land here.  The handle is never
 * closed: libcurl stays mapped for the life of the process once a
 * configuration has enabled the upstream.
 */
/* The type-checking macros would rename the definitions below. */
#define CURL_DISABLE_TYPECHECK
#include "upstream/curlapi.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENR_CURL_SONAME "libcurl.so.4" /* Debian 12: libcurl4 (OpenSSL flavour) */

/* One pointer per forwarded function, named and typed after it (its
 * prototype in <curl/curl.h>). */
#define CURL_FUNCTIONS(X)                                                                          \
    X(curl_global_init)                                                                            \
    X(curl_global_cleanup)                                                                         \
    X(curl_version)                                                                                \
    X(curl_easy_init)                                                                              \
    X(curl_easy_cleanup)                                                                           \
    X(curl_easy_setopt)                                                                            \
    X(curl_easy_getinfo)                                                                           \
    X(curl_easy_perform)                                                                           \
    X(curl_easy_strerror)                                                                          \
    X(curl_multi_init)                                                                             \
    X(curl_multi_cleanup)                                                                          \
    X(curl_multi_setopt)                                                                           \
    X(curl_multi_add_handle)                                                                       \
    X(curl_multi_remove_handle)                                                                    \
    X(curl_multi_perform)                                                                          \
    X(curl_multi_poll)                                                                             \
    X(curl_multi_info_read)                                                                        \
    X(curl_multi_socket_action)                                                                    \
    X(curl_share_init)                                                                             \
    X(curl_share_setopt)                                                                           \
    X(curl_share_cleanup)                                                                          \
    X(curl_multi_strerror)                                                                         \
    X(curl_url)                                                                                    \
    X(curl_url_cleanup)                                                                            \
    X(curl_url_set)                                                                                \
    X(curl_url_get)                                                                                \
    X(curl_free)                                                                                   \
    X(curl_slist_append)                                                                           \
    X(curl_slist_free_all)

static struct {
#define FIELD(name) __typeof__(name) *name;
    CURL_FUNCTIONS(FIELD)
#undef FIELD
} real;

static const struct {
    const char *name;
    size_t offset;
} symbols[] = {
#define SYM(name) {#name, offsetof(__typeof__(real), name)},
    CURL_FUNCTIONS(SYM)
#undef SYM
};

int enr_curl_load(char *err, size_t errlen)
{
    static void *lib;
    void *h;
    size_t i;

    if (lib != NULL)
        return 0;
    h = dlopen(ENR_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "cannot load %s: %s", ENR_CURL_SONAME, dlerror());
        return -1;
    }
    for (i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        void *sym = dlsym(h, symbols[i].name);

        if (sym == NULL) {
            snprintf(err, errlen, "%s: missing symbol %s", ENR_CURL_SONAME, symbols[i].name);
            memset(&real, 0, sizeof(real));
            dlclose(h);
            return -1;
        }
        /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
        memcpy((char *)&real + symbols[i].offset, &sym, sizeof(sym));
    }
    lib = h;
    return 0;
}

/* A call before enr_curl_load() succeeded: a bug in the caller. */
static void not_loaded(const char *name)
{
    fprintf(stderr, "enrichd: %s called before libcurl was loaded\n", name);
    abort();
}

#define REAL(name) (real.name != NULL ? real.name : (not_loaded(#name), real.name))

CURLcode curl_global_init(long flags)
{
    return REAL(curl_global_init)(flags);
}

void curl_global_cleanup(void)
{
    REAL(curl_global_cleanup)();
}

char *curl_version(void)
{
    return REAL(curl_version)();
}

CURL *curl_easy_init(void)
{
    return REAL(curl_easy_init)();
}

void curl_easy_cleanup(CURL *h)
{
    REAL(curl_easy_cleanup)(h);
}

/* The body of a variadic option setter (curl_easy_setopt,
 * curl_multi_setopt), of return type rtype: the one argument after the
 * option is one long, object pointer, function pointer or curl_off_t,
 * told by the option's number (CURLOPTTYPE_*, the same ranges for
 * CURLMOPT_*), as libcurl itself reads it; a blob is a pointer. */
#define FORWARD_OPTION(rtype, fn, h, opt)                                                          \
    ({                                                                                             \
        rtype rc;                                                                                  \
        va_list ap;                                                                                \
        va_start(ap, opt);                                                                         \
        if ((opt) < CURLOPTTYPE_OBJECTPOINT)                                                       \
            rc = REAL(fn)((h), (opt), va_arg(ap, long));                                           \
        else if ((opt) < CURLOPTTYPE_FUNCTIONPOINT)                                                \
            rc = REAL(fn)((h), (opt), va_arg(ap, void *));                                         \
        else if ((opt) < CURLOPTTYPE_OFF_T)                                                        \
            rc = REAL(fn)((h), (opt), va_arg(ap, void (*)(void)));                                 \
        else if ((opt) < CURLOPTTYPE_BLOB)                                                         \
            rc = REAL(fn)((h), (opt), va_arg(ap, curl_off_t));                                     \
        else                                                                                       \
            rc = REAL(fn)((h), (opt), va_arg(ap, void *));                                         \
        va_end(ap);                                                                                \
        rc;                                                                                        \
    })

CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
    return FORWARD_OPTION(CURLcode, curl_easy_setopt, h, opt);
}

/* Every CURLINFO_* takes one pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
    CURLcode rc;
    va_list ap;

    va_start(ap, info);
    rc = REAL(curl_easy_getinfo)(h, info, va_arg(ap, void *));
    va_end(ap);
    return rc;
}

CURLcode curl_easy_perform(CURL *h)
{
    return REAL(curl_easy_perform)(h);
}

const char *curl_easy_strerror(CURLcode rc)
{
    return REAL(curl_easy_strerror)(rc);
}

CURLM *curl_multi_init(void)
{
    return REAL(curl_multi_init)();
}

CURLMcode curl_multi_cleanup(CURLM *m)
{
    return REAL(curl_multi_cleanup)(m);
}

CURLMcode curl_multi_setopt(CURLM *m, CURLMoption opt, ...)
{
    return FORWARD_OPTION(CURLMcode, curl_multi_setopt, m, opt);
}

CURLMcode curl_multi_add_handle(CURLM *m, CURL *h)
{
    return REAL(curl_multi_add_handle)(m, h);
}

CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h)
{
    return REAL(curl_multi_remove_handle)(m, h);
}

CURLMcode curl_multi_perform(CURLM *m, int *running)
{
    return REAL(curl_multi_perform)(m, running);
}

CURLMcode curl_multi_poll(CURLM *m, struct curl_waitfd extra_fds[], unsigned int extra_nfds,
                          int timeout_ms, int *ret)
{
    return REAL(curl_multi_poll)(m, extra_fds, extra_nfds, timeout_ms, ret);
}

CURLMcode curl_multi_socket_action(CURLM *m, curl_socket_t s, int ev_bitmask, int *running)
{
    return REAL(curl_multi_socket_action)(m, s, ev_bitmask, running);
}

CURLSH *curl_share_init(void)
{
    return REAL(curl_share_init)();
}

/* CURLSHOPT_SHARE and _UNSHARE take a long, the lock functions a function
 * pointer, USERDATA an object pointer. */
CURLSHcode curl_share_setopt(CURLSH *sh, CURLSHoption opt, ...)
{
    CURLSHcode rc;
    va_list ap;

    va_start(ap, opt);
    if (opt == CURLSHOPT_SHARE || opt == CURLSHOPT_UNSHARE)
        rc = REAL(curl_share_setopt)(sh, opt, va_arg(ap, long));
    else if (opt == CURLSHOPT_LOCKFUNC || opt == CURLSHOPT_UNLOCKFUNC)
        rc = REAL(curl_share_setopt)(sh, opt, va_arg(ap, void (*)(void)));
    else
        rc = REAL(curl_share_setopt)(sh, opt, va_arg(ap, void *));
    va_end(ap);
    return rc;
}

CURLSHcode curl_share_cleanup(CURLSH *sh)
{
    return REAL(curl_share_cleanup)(sh);
}

CURLMsg *curl_multi_info_read(CURLM *m, int *left)
{
    return REAL(curl_multi_info_read)(m, left);
}

const char *curl_multi_strerror(CURLMcode rc)
{
    return REAL(curl_multi_strerror)(rc);
}

CURLU *curl_url(void)
{
    return REAL(curl_url)();
}

void curl_url_cleanup(CURLU *u)
{
    REAL(curl_url_cleanup)(u);
}

CURLUcode curl_url_set(CURLU *u, CURLUPart what, const char *part, unsigned int flags)
{
    return REAL(curl_url_set)(u, what, part, flags);
}

CURLUcode curl_url_get(CURLU *u, CURLUPart what, char **part, unsigned int flags)
{
    return REAL(curl_url_get)(u, what, part, flags);
}

void curl_free(void *p)
{
    REAL(curl_free)(p);
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
    return REAL(curl_slist_append)(l, s);
}

void curl_slist_free_all(struct curl_slist *l)
{
    REAL(curl_slist_free_all)(l);
}

int enr_curl_ca_defaults(char *bundle, size_t blen, char *dir, size_t dlen)
{
    CURL *e = curl_easy_init();
    char *v;

    if (e == NULL)
        return -1;
    bundle[0] = dir[0] = '\0';
    if (curl_easy_getinfo(e, CURLINFO_CAINFO, &v) == CURLE_OK && v != NULL)
        snprintf(bundle, blen, "%s", v);
    if (curl_easy_getinfo(e, CURLINFO_CAPATH, &v) == CURLE_OK && v != NULL)
        snprintf(dir, dlen, "%s", v);
    curl_easy_cleanup(e);
    return 0;
}
