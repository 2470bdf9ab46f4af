/*
 * config_cred.c: the credential files a configuration names (config.h,
 * "credentials"): the secrets, each read into an enr_secret, and the TLS
 * files libcurl reads in each worker.  config.c checks what the keys say;
 * this file is the only one that opens the files, and only for the
 * commands that need them: the daemon reads (at start and on HUP), -t
 * looks without reading.
 *
 * A secret is one row of `secrets` (where its file or credential is
 * named, where it is kept, the URL it is sent to): the aggregator's, and
 * one per API whose row in base/sources.h says SECRET, made from that row
 * (its keys are confkeys.inc's KSECRET rows); loading, -t, a reload's
 * cache comparison, its wipe and the children's unmapping follow.  Where
 * it goes in a call is its client's business (secret.h's bytes and len).
 *
 * Invariants: no secret goes in clear text to another host (one rule
 * over the rows, in enr_config_check_secret_keys, so a new provider's
 * secret has it by being a row); no message here holds a byte of a
 * secret; the daemon keeps every secret of a configuration or none (a
 * failure frees what was read); a secret lives in exactly one mapping per
 * process, freed once (a copied enr_config points at the same one:
 * `keep`).
 */
#include "base/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/secret.h"

typedef struct cred_secret {
    const char *file_key, *cred_key; /* one of them names it */
    size_t file_off, cred_off;
    const char *name;    /* its enr_secret's field, for a reload's log */
    size_t secret_off;   /* its enr_secret */
    const char *url_key; /* where it is sent */
    size_t url_off;
    int provider, source; /* read only while c->sources[provider] == source; -1: always */
} cred_secret;

#define F(field) offsetof(enr_config, field)

static const cred_secret secrets[] = {
    {"upstream_secret_file", "upstream_secret_credential", F(upstream_secret_file),
     F(upstream_secret_credential), "upstream_secret", F(upstream_secret), "upstream_url",
     F(upstream_url), -1, -1},
#define API_SECRET(NAME, name, PROV, S, word, ...) API_SECRET_##S(NAME, name, PROV, word)
#define API_SECRET_NOSECRET(...)
#define API_SECRET_SECRET(NAME, name, PROV, word)                                                  \
    {#name "_" #word "_file",                                                                      \
     #name "_" #word "_credential",                                                                \
     F(api[ENR_SOURCE_##NAME].secret_file),                                                        \
     F(api[ENR_SOURCE_##NAME].secret_credential),                                                  \
     #name "_" #word,                                                                              \
     F(api[ENR_SOURCE_##NAME].secret),                                                             \
     #name "_url",                                                                                 \
     F(api[ENR_SOURCE_##NAME].url),                                                                \
     ENR_SOURCE_PROV_##PROV,                                                                       \
     ENR_SOURCE_##NAME},
    ENR_SOURCE_LIST(API_SECRET)
#undef API_SECRET_SECRET
#undef API_SECRET_NOSECRET
#undef API_SECRET
        {"shared_store_password_file", "shared_store_password_credential",
         F(shared_store_password_file), F(shared_store_password_credential),
         "shared_store_password", F(shared_store_password), "shared_store", F(shared_store), -1,
         -1},
};
#define N_SECRETS (sizeof secrets / sizeof secrets[0])

static const struct {
    const char *key;
    size_t off;
    enr_cred_kind kind;
} tls_files[] = {
    {"upstream_ca_file", F(upstream_ca_file), ENR_CRED_PUBLIC},
    {"upstream_client_cert", F(upstream_client_cert), ENR_CRED_PUBLIC},
    {"upstream_client_key", F(upstream_client_key), ENR_CRED_PRIVATE},
};
#define N_TLS (sizeof tls_files / sizeof tls_files[0])

#define FIELD(c, off) ((const char *)(c) + (off))
#define SECRET(c, off) ((enr_secret *)((char *)(c) + (off)))
#define CSECRET(c, off) ((const enr_secret *)((const char *)(c) + (off)))

static int failed(const enr_config *c, const char *key, char *err, size_t errlen, const char *why)
{
    snprintf(err, errlen, "%s:%u: %s: %s", c->source, enr_config_line(c, key), key, why);
    return -1;
}

static void warned(const enr_config *c, const char *key, enr_warn_fn warn, void *arg,
                   const char *why)
{
    char msg[4096];

    if (warn == NULL)
        return;
    snprintf(msg, sizeof msg, "%s:%u: %s: %s", c->source, enr_config_line(c, key), key, why);
    warn(arg, msg);
}

/* 0 when no source sends secret s (a provider's key while another API
 * serves its records): it is then never read nor sent. */
static int secret_used(const enr_config *c, const cred_secret *s)
{
    return s->provider < 0 || c->sources[s->provider] == s->source;
}

/* The key that names secret s in c, and the file it names; NULL when c
 * has none.  A credential outside a unit: 1 and why. */
static const char *secret_source(const enr_config *c, const cred_secret *s, char *path,
                                 size_t pathlen, const char **key, char *why, size_t whylen)
{
    const char *file = FIELD(c, s->file_off), *cred = FIELD(c, s->cred_off);

    if (!secret_used(c, s))
        return NULL; /* no source uses it: never read */
    if (file[0] != '\0') {
        *key = s->file_key;
        snprintf(path, pathlen, "%s", file);
        return path;
    }
    if (cred[0] == '\0')
        return NULL;
    *key = s->cred_key;
    if (enr_secret_credential_path(cred, path, pathlen, why, whylen) != 0)
        return "";
    return path;
}

/* Every secret, whatever its provider: one sent in clear text to another
 * host is refused, since anyone on the path reads it and keeps it.
 * Loopback stays allowed (a proxy on the host, and the tests' fakes). */
static int cleartext_refused(const enr_config *c, const cred_secret *s, const char *key, char *err,
                             size_t errlen)
{
    char why[1024], shown[512];

    if (!secret_used(c, s) || !enr_secret_cleartext_url(FIELD(c, s->url_off)))
        return 0;
    enr_url_redact(FIELD(c, s->url_off), shown, sizeof shown);
    snprintf(why, sizeof why,
             "refused: the secret would go in clear text to another host (%s = %s), where "
             "anyone on the path reads it; use https://, or a loopback address",
             s->url_key, shown);
    return failed(c, key, err, errlen, why);
}

int enr_config_check_secret_keys(const enr_config *c, char *err, size_t errlen)
{
    char why[ENR_PATH_MAX + 200];

    for (size_t i = 0; i < N_SECRETS; i++) {
        const char *file = FIELD(c, secrets[i].file_off), *cred = FIELD(c, secrets[i].cred_off);
        if (file[0] != '\0' && cred[0] != '\0') {
            snprintf(why, sizeof why, "set %s or %s, not both", secrets[i].file_key,
                     secrets[i].cred_key);
            return failed(c, secrets[i].cred_key, err, errlen, why);
        }
        if (cred[0] != '\0' && enr_secret_credential_name_check(cred, why, sizeof why) != 0)
            return failed(c, secrets[i].cred_key, err, errlen, why);
        if ((file[0] != '\0' || cred[0] != '\0') && FIELD(c, secrets[i].url_off)[0] == '\0') {
            snprintf(why, sizeof why, "needs %s", secrets[i].url_key);
            return failed(c, file[0] ? secrets[i].file_key : secrets[i].cred_key, err, errlen, why);
        }
        if ((file[0] != '\0' || cred[0] != '\0') &&
            cleartext_refused(c, &secrets[i], file[0] ? secrets[i].file_key : secrets[i].cred_key,
                              err, errlen) != 0)
            return -1;
    }
    return 0;
}

int enr_config_load_secrets(enr_config *c, char *err, size_t errlen)
{
    enr_secret got[N_SECRETS];
    char path[ENR_PATH_MAX + 64], why[ENR_PATH_MAX + 200];
    size_t i;

    memset(got, 0, sizeof got);
    /* Each worker's libcurl reads these: one it cannot read would only
     * show as failed calls. */
    for (i = 0; i < N_TLS; i++) {
        const char *file = FIELD(c, tls_files[i].off);
        struct stat st;
        if (file[0] == '\0')
            continue;
        if (stat(file, &st) != 0 || access(file, R_OK) != 0) {
            snprintf(why, sizeof why, "\"%s\" cannot be read: %s", file, strerror(errno));
            return failed(c, tls_files[i].key, err, errlen, why);
        }
        if (enr_cred_mode_check(file, &st, tls_files[i].kind, why, sizeof why) != 0)
            return failed(c, tls_files[i].key, err, errlen, why);
    }
    for (i = 0; i < N_SECRETS; i++) {
        const char *key = NULL;
        const char *p = secret_source(c, &secrets[i], path, sizeof path, &key, why, sizeof why);
        if (p == NULL)
            continue;
        if (p[0] == '\0' || enr_secret_load(&got[i], p, why, sizeof why) != 0) {
            while (i-- > 0)
                enr_secret_free(&got[i]);
            return failed(c, key, err, errlen, why);
        }
    }
    for (i = 0; i < N_SECRETS; i++) {
        enr_secret_free(SECRET(c, secrets[i].secret_off));
        *SECRET(c, secrets[i].secret_off) = got[i];
    }
    return 0;
}

int enr_config_probe_credentials(const enr_config *c, enr_warn_fn warn, void *arg, char *err,
                                 size_t errlen)
{
    char path[ENR_PATH_MAX + 64], why[ENR_PATH_MAX + 300], what[ENR_PATH_MAX + 400];
    int rc;

    for (size_t i = 0; i < N_TLS; i++) {
        const char *file = FIELD(c, tls_files[i].off);
        if (file[0] == '\0')
            continue;
        rc = enr_cred_probe(file, tls_files[i].kind, 0, why, sizeof why);
        if (rc < 0)
            return failed(c, tls_files[i].key, err, errlen, why);
        if (rc > 0) {
            snprintf(what, sizeof what,
                     "not checked: %s (uid %ld cannot look; the daemon's user must read it)", why,
                     (long)geteuid());
            warned(c, tls_files[i].key, warn, arg, what);
        }
    }
    for (size_t i = 0; i < N_SECRETS; i++) {
        const char *key = NULL;
        const char *p = secret_source(c, &secrets[i], path, sizeof path, &key, why, sizeof why);
        if (p == NULL)
            continue;
        if (p[0] == '\0') {
            /* ExecStartPre and ExecReload have the unit's credentials;
             * an operator's shell does not. */
            snprintf(what, sizeof what, "not checked: %s; the daemon reads it at start", why);
            warned(c, key, warn, arg, what);
        } else if ((rc = enr_cred_probe(p, ENR_CRED_PRIVATE, 1, why, sizeof why)) < 0) {
            return failed(c, key, err, errlen, why);
        } else if (rc > 0) {
            snprintf(what, sizeof what,
                     "not checked: %s (uid %ld cannot look; the daemon's user must read it)", why,
                     (long)geteuid());
            warned(c, key, warn, arg, what);
        }
    }
    return 0;
}

void enr_config_secrets_free(enr_config *c, const enr_config *keep)
{
    for (size_t i = 0; i < N_SECRETS; i++) {
        enr_secret *s = SECRET(c, secrets[i].secret_off);
        if (keep == NULL || s->bytes != SECRET(keep, secrets[i].secret_off)->bytes)
            enr_secret_free(s);
        else
            memset(s, 0, sizeof *s); /* keep's now */
    }
}

void enr_config_secrets_child(enr_config *a, enr_config *b, const enr_config *keep)
{
    for (size_t i = 0; i < N_SECRETS; i++) {
        enr_secret *sa = SECRET(a, secrets[i].secret_off), *sb = SECRET(b, secrets[i].secret_off);
        const char *kept = keep ? SECRET(keep, secrets[i].secret_off)->bytes : NULL;
        /* a and b may share one mapping (b is a after a commit): once */
        if (sb->bytes == sa->bytes && sb != sa && sb->bytes != kept)
            memset(sb, 0, sizeof *sb);
        if (sa->bytes != kept)
            enr_secret_forget(sa);
        if (sb->bytes != kept)
            enr_secret_forget(sb);
        if (kept != NULL)
            enr_secret_relock(SECRET(keep, secrets[i].secret_off));
    }
    enr_secret_child_dumpable();
}

const char *enr_config_secret_change(const enr_config *a, const enr_config *b)
{
    for (size_t i = 0; i < N_SECRETS; i++) {
        /* the bytes themselves: the master holds both (secret.h) */
        const enr_secret *x = CSECRET(a, secrets[i].secret_off);
        const enr_secret *y = CSECRET(b, secrets[i].secret_off);
        if (x->len != y->len || (x->len != 0 && (x->bytes == NULL || y->bytes == NULL ||
                                                 memcmp(x->bytes, y->bytes, x->len) != 0)))
            return secrets[i].name;
    }
    return NULL;
}

void enr_config_secret_parts(const enr_config *c, enr_config_part_fn fn, void *arg)
{
    for (size_t i = 0; i < N_SECRETS; i++) {
        const enr_secret *x = CSECRET(c, secrets[i].secret_off);
        fn(arg, secrets[i].name, x->bytes, x->bytes != NULL ? x->len : 0);
    }
}
