/*
 * curlapi.c: resolves libcurl's entry points at run time (see curlapi.h
 * for why).  The handle is never closed: libcurl stays mapped for the
 * life of the process once a configuration has enabled the upstream.
 */
#define ENR_CURLAPI_IMPL
#include "curlapi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define ENR_CURL_SONAME "libcurl.so.4" /* Debian 12: libcurl4 (OpenSSL flavour) */

struct enr_curl_api enr_curl;

static const struct {
    const char *name;
    size_t offset;
} symbols[] = {
#define SYM(field, name)                                                                           \
    {                                                                                              \
        name, offsetof(struct enr_curl_api, field)                                                 \
    }
    SYM(global_init, "curl_global_init"),
    SYM(global_cleanup, "curl_global_cleanup"),
    SYM(version, "curl_version"),
    SYM(easy_init, "curl_easy_init"),
    SYM(easy_cleanup, "curl_easy_cleanup"),
    SYM(easy_setopt, "curl_easy_setopt"),
    SYM(easy_getinfo, "curl_easy_getinfo"),
    SYM(easy_perform, "curl_easy_perform"),
    SYM(easy_strerror, "curl_easy_strerror"),
    SYM(multi_init, "curl_multi_init"),
    SYM(multi_cleanup, "curl_multi_cleanup"),
    SYM(multi_setopt, "curl_multi_setopt"),
    SYM(multi_add_handle, "curl_multi_add_handle"),
    SYM(multi_remove_handle, "curl_multi_remove_handle"),
    SYM(multi_perform, "curl_multi_perform"),
    SYM(multi_poll, "curl_multi_poll"),
    SYM(multi_info_read, "curl_multi_info_read"),
    SYM(multi_strerror, "curl_multi_strerror"),
    SYM(url, "curl_url"),
    SYM(url_cleanup, "curl_url_cleanup"),
    SYM(url_set, "curl_url_set"),
    SYM(url_get, "curl_url_get"),
    SYM(free, "curl_free"),
    SYM(slist_append, "curl_slist_append"),
    SYM(slist_free_all, "curl_slist_free_all"),
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
            memset(&enr_curl, 0, sizeof(enr_curl));
            dlclose(h);
            return -1;
        }
        /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
        memcpy((char *)&enr_curl + symbols[i].offset, &sym, sizeof(sym));
    }
    lib = h;
    return 0;
}
