/*
 * confsource.c: where each provider's records are enriched from
 * (yt_source, vm_source, dm_source) and the secrets those sources need
 * (config.h, enr_config_sources).
 *
 * A source is a provider's own API (a row of base/sources.h: each for
 * the provider its row names only), the aggregator protocol at upstream_url
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
 * whose row says SECRET names its key or token (config_cred.c reads it,
 * only when a source uses it), and no message quotes them.
 */
#include "base/config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A provider's key, as enum enr_provider numbers it. */
typedef struct source_row {
    int provider;    /* enum enr_provider */
    const char *key; /* yt_source */
    size_t off;      /* the key's field */
} source_row;

#define CF(f) offsetof(enr_config, f)

static const source_row rows[] = {
    {ENR_SOURCE_PROV_YT, "yt_source", CF(yt_source)},
    {ENR_SOURCE_PROV_VM, "vm_source", CF(vm_source)},
    {ENR_SOURCE_PROV_DM, "dm_source", CF(dm_source)},
};

/* What a source's row says of it (base/sources.h); [ENR_SOURCE_UPSTREAM]
 * serves every provider and needs no secret here. */
typedef struct api_row {
    int provider;       /* the one it serves; 0: all */
    const char *secret; /* the secret's keys' stem ("youtube_key"), NULL: none */
    const char *noun;   /* what the secret is called */
} api_row;

#define API_STEM_SECRET(name, word) #name "_" #word
#define API_STEM_NOSECRET(name, word) NULL
#define API_ROW(NAME, name, PROV, S, word, noun, ...)                                              \
    {ENR_SOURCE_PROV_##PROV, API_STEM_##S(name, word), noun},
static const api_row apis[ENR_SOURCE_COUNT] = {{0, NULL, NULL}, ENR_SOURCE_LIST(API_ROW)};
#undef API_ROW

/* Every source a provider's key may name, for a message. */
#define API_WORD(NAME, name, ...) #name ", "
static const char api_words[] = ENR_SOURCE_LIST(API_WORD) "upstream or off";
#undef API_WORD

#define SOURCE_NAME(NAME, name, ...) #name,
const char *const enr_config_source_names[ENR_SOURCE_COUNT] = {"upstream",
                                                               ENR_SOURCE_LIST(SOURCE_NAME)};
#undef SOURCE_NAME
#define api_names enr_config_source_names

/* The aggregator's keys are the upstream_* ones (config.h), not a row's. */
const char *enr_config_source_url(const enr_config *c, int api)
{
    if (api == ENR_SOURCE_UPSTREAM)
        return c->upstream_url;
    return api > ENR_SOURCE_UPSTREAM && api < ENR_SOURCE_COUNT ? c->api[api].url : "";
}

unsigned enr_config_source_ttl(const enr_config *c, int api)
{
    if (api == ENR_SOURCE_UPSTREAM)
        return c->cache_ttl_s;
    return api > ENR_SOURCE_UPSTREAM && api < ENR_SOURCE_COUNT ? c->api[api].cache_ttl_s : 0;
}

int enr_config_enriches(const enr_config *c)
{
    for (int p = ENR_SOURCE_PROV_YT; p < ENR_SOURCE_PROVIDERS; p++)
        if (c->sources[p] != ENR_SOURCE_OFF)
            return 1;
    return 0;
}

/* The secret of source api is named, by its file or its credential
 * (which one, and the rest, config_cred.c checks; only the daemon reads
 * it). */
static int secret_named(enr_config *c, int api, const char **key, const source_row *r, char *why,
                        size_t whylen)
{
    const enr_config_api *a = &c->api[api];

    if (apis[api].secret == NULL || a->secret_file[0] != '\0' || a->secret_credential[0] != '\0')
        return 0;
    *key = r->key;
    snprintf(why, whylen, "%s needs %s_file or %s_credential (the %s)", api_names[api],
             apis[api].secret, apis[api].secret, apis[api].noun);
    return -1;
}

/* The first API that serves provider p, for a message. */
static const char *own_api(int p)
{
    for (int a = ENR_SOURCE_UPSTREAM + 1; a < ENR_SOURCE_COUNT; a++)
        if (apis[a].provider == p)
            return api_names[a];
    return "none";
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
                snprintf(why, whylen, "\"%s\" is not a source (%s)", v, api_words);
                return -1;
            }
            if (api != ENR_SOURCE_UPSTREAM && apis[api].provider != r->provider) {
                snprintf(why, whylen, "%s is the API of another provider's videos (here: %s)", v,
                         own_api(r->provider));
                return -1;
            }
            if (enr_config_source_url(c, api)[0] == '\0') {
                snprintf(why, whylen, "%s needs %s_url", v, v);
                return -1;
            }
            if (secret_named(c, api, key, r, why, whylen) != 0)
                return -1;
        }
        c->sources[r->provider] = api;
    }
    return 0;
}

int enr_config_any_https(const enr_config *c)
{
    for (int p = ENR_SOURCE_PROV_YT; p < ENR_SOURCE_PROVIDERS; p++)
        if (c->sources[p] != ENR_SOURCE_OFF &&
            strncasecmp(enr_config_source_url(c, c->sources[p]), "https://", 8) == 0)
            return 1;
    return 0;
}
