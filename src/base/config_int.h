/*
 * config_int.h: what the configuration's two files share and nobody else
 * sees: the key table.  conftable.c makes it from the rows of confkeys.inc
 * (each key's name, type, bounds, place in enr_config, default, what a
 * HUP does with it) and prints a configuration back by it (-T);
 * config.c parses and checks a file by it.  config.h is the public face.
 *
 * Invariants: enr_config_nkeys <= ENR_CONFIG_KEYS_MAX (checked at compile
 * time in conftable.c), so a key's index in the table indexes every array
 * sized by ENR_CONFIG_KEYS_MAX (enr_config.key_line, the parser's own).
 */
#ifndef ENR_CONFIG_INT_H
#define ENR_CONFIG_INT_H

#include <stddef.h>

enum enr_config_key_type {
    ENR_KEY_STR,
    ENR_KEY_UINT,
    ENR_KEY_PER_CPU, /* ENR_KEY_UINT, or "auto": ENR_WORKERS_PER_CPU per CPU this process may run
                      * on, at most ENR_WORKERS_AUTO_MAX */
    ENR_KEY_MODE,
    ENR_KEY_SIZE,
    ENR_KEY_RATIO,
    ENR_KEY_LISTEN,
    ENR_KEY_URL,
    ENR_KEY_GROUP,
    ENR_KEY_PATH,
    ENR_KEY_ALLOW,
    ENR_KEY_HEADER /* may be given up to ENR_UP_HEADERS_MAX times; each line adds one */
};

/* What a HUP does with a key (confkeys.inc says what each means). */
enum enr_config_reload {
    ENR_RELOAD_LIVE,
    ENR_RELOAD_RESTART,
    ENR_RELOAD_IDENTITY,
    ENR_RELOAD_LAYOUT
};

typedef struct enr_config_key {
    const char *name;
    enum enr_config_key_type type;
    size_t off;
    size_t size;               /* string-like: capacity; numbers: sizeof field */
    unsigned long long lo, hi; /* inclusive bounds for ENR_KEY_UINT, _SIZE and _MODE */
    enum enr_config_reload reload;
    const char *field; /* its enr_config field's name (a reload's log names it) */
} enr_config_key;

/* A key whose field is a NUL-terminated string of at most size - 1
 * bytes: parsed, compared, printed and hashed as text. */
static inline int enr_config_key_is_text(const enr_config_key *k)
{
    switch (k->type) {
    case ENR_KEY_STR:
    case ENR_KEY_LISTEN:
    case ENR_KEY_URL:
    case ENR_KEY_GROUP:
    case ENR_KEY_PATH:
    case ENR_KEY_ALLOW:
        return 1;
    default:
        return 0;
    }
}

/* One row each of confkeys.inc, in its order: -T's and conf/enrichd.conf's. */
extern const enr_config_key enr_config_keys[];
extern const size_t enr_config_nkeys;

#endif
