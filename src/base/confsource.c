/*
 * confsource.c: where each provider's records are enriched from
 * (yt_source, vm_source, dm_source) and the secrets those sources need
 * (config.h, enr_config_sources).
 *
 * A source is the provider's own API (youtube, vimeo, dailymotion: each
 * for its own provider only), the aggregator protocol at upstream_url
 * (upstream), or off.  Left empty, a source is upstream where
 * upstream_url is set, else off, so a configuration written before the
 * sources existed keeps doing exactly what it did.
 *
 * The numbers are the engine's providers (engine/contract.h) and the
 * upstream's sources (base/sources.h, ENR_SOURCE_LIST), which this layer
 * below both cannot include: config.h names them, and upstream_setup.c
 * checks at compile time that they agree.
 *
 * Invariants: after a pass, every *_source string is one of the values
 * above and c->sources[] says the same as an enum enr_api_id; a source
 * that needs the YouTube key or the Vimeo token names one (config_cred.c
 * reads it, only when a source uses it), and no message quotes them.
 */
#include "base/config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct source_row {
    int provider;       /* enum enr_provider */
    const char *key;    /* yt_source */
    size_t off;         /* the key's field */
    int own;            /* the API that serves this provider */
    const char *secret; /* the secret's keys' stem ("youtube_key"), NULL: none */
    size_t file_off;    /* ... _file */
    size_t cred_off;    /* ... _credential */
} source_row;

#define CF(f) offsetof(enr_config, f)

static const source_row rows[] = {
    {ENR_SOURCE_PROV_YT, "yt_source", CF(yt_source), ENR_SOURCE_YOUTUBE, "youtube_key",
     CF(youtube_key_file), CF(youtube_key_credential)},
    {ENR_SOURCE_PROV_VM, "vm_source", CF(vm_source), ENR_SOURCE_VIMEO, "vimeo_token",
     CF(vimeo_token_file), CF(vimeo_token_credential)},
    {ENR_SOURCE_PROV_DM, "dm_source", CF(dm_source), ENR_SOURCE_DAILYMOTION, NULL, 0, 0},
};

const char *const enr_config_source_names[ENR_SOURCE_COUNT] = {"upstream",
#define SOURCE_NAME(NAME, name, ...) #name,
                                                               ENR_SOURCE_LIST(SOURCE_NAME)
#undef SOURCE_NAME
};
#define api_names enr_config_source_names

const char *enr_config_source_url(const enr_config *c, int api)
{
    switch (api) {
    case ENR_SOURCE_UPSTREAM:
        return c->upstream_url;
    case ENR_SOURCE_YOUTUBE:
        return c->youtube_url;
    case ENR_SOURCE_VIMEO:
        return c->vimeo_url;
    case ENR_SOURCE_DAILYMOTION:
        return c->dailymotion_url;
    default:
        return "";
    }
}

int enr_config_enriches(const enr_config *c)
{
    for (int p = ENR_SOURCE_PROV_YT; p <= ENR_SOURCE_PROV_DM; p++)
        if (c->sources[p] != ENR_SOURCE_OFF)
            return 1;
    return 0;
}

/* The secret of row r is named, by its file or its credential (which
 * one, and the rest, config_cred.c checks; only the daemon reads it). */
static int secret_named(enr_config *c, const source_row *r, const char **key, char *why,
                        size_t whylen)
{
    const char *file = (const char *)c + r->file_off, *cred = (const char *)c + r->cred_off;

    if (file[0] != '\0' || cred[0] != '\0')
        return 0;
    *key = r->key;
    snprintf(why, whylen, "%s needs %s_file or %s_credential (%s)", api_names[r->own], r->secret,
             r->secret, r->provider == ENR_SOURCE_PROV_YT ? "the API key" : "the access token");
    return -1;
}

int enr_config_sources(enr_config *c, const char **key, char *why, size_t whylen)
{
    c->sources[0] = ENR_SOURCE_OFF;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const source_row *r = &rows[i];
        char *v = (char *)c + r->off;
        int api = ENR_SOURCE_OFF;

        *key = r->key;
        if (v[0] == '\0')
            snprintf(v, sizeof c->yt_source, "%s", c->upstream_url[0] ? "upstream" : "off");
        if (strcmp(v, "off") != 0) {
            for (int a = 0; a < ENR_SOURCE_COUNT; a++)
                if (strcmp(v, api_names[a]) == 0)
                    api = a;
            if (api == ENR_SOURCE_OFF) {
                snprintf(why, whylen,
                         "\"%s\" is not a source (youtube, vimeo, dailymotion, upstream or off)",
                         v);
                return -1;
            }
            if (api != ENR_SOURCE_UPSTREAM && api != r->own) {
                snprintf(why, whylen, "%s is the API of another provider's videos (here: %s)", v,
                         api_names[r->own]);
                return -1;
            }
            if (enr_config_source_url(c, api)[0] == '\0') {
                snprintf(why, whylen, "%s needs %s_url", v, v);
                return -1;
            }
            if (api == r->own && r->secret != NULL && secret_named(c, r, key, why, whylen) != 0)
                return -1;
        }
        c->sources[r->provider] = api;
    }
    return 0;
}

int enr_config_any_https(const enr_config *c)
{
    for (int p = ENR_SOURCE_PROV_YT; p <= ENR_SOURCE_PROV_DM; p++)
        if (c->sources[p] != ENR_SOURCE_OFF &&
            strncasecmp(enr_config_source_url(c, c->sources[p]), "https://", 8) == 0)
            return 1;
    return 0;
}
