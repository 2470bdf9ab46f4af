/*
 * test_upfail.c: the table of how an upstream call ends (base/upfail.h):
 * its rows well formed, every one a counter of base/upcounters.h, and the
 * pause reasons' words and ranks as the scoreboard and the surfaces read
 * them.
 */
#include <string.h>

#include "base/upcounters.h"
#include "base/upfail.h"
#include "t.h"

/* Each word a label value and a JSON key; each kind one counter. */
static void test_rows(void)
{
    for (int k = 0; k < ENR_UP_NFAILS; k++) {
        const enr_up_fail_row *r = &enr_up_fail_rows[k];
        int counters = 0;
        T_CHECK(r->word[0] != '\0' &&
                    strspn(r->word, "abcdefghijklmnopqrstuvwxyz_") == strlen(r->word),
                "kind %d: a word of [a-z_]: \"%s\"", k, r->word);
        T_STREQ(enr_up_fail_name(k), r->word);
        T_CHECK(r->help[0] != '\0', "%s: a help text", r->word);
        T_CHECK(r->breaker <= 1 && r->degraded <= 1, "%s: flags 0 or 1", r->word);
        for (int j = 0; j < k; j++)
            T_CHECK(strcmp(enr_up_fail_rows[j].word, r->word) != 0, "%s: one row", r->word);
        for (unsigned c = 0; c < ENR_UP_NCOUNTERS; c++)
            if (strcmp(enr_up_counter_rows[c].kind, r->word) == 0) {
                counters++;
                T_STREQ(enr_up_counter_rows[c].field, r->field);
                T_STREQ(enr_up_counter_rows[c].metric, ENR_UP_FAIL_METRIC);
                T_STREQ(enr_up_counter_rows[c].help, r->help);
            }
        T_CHECK(counters == 1, "%s: one counter row, not %d", r->word, counters);
    }
    T_STREQ(enr_up_fail_name(-1), "unknown");
    T_STREQ(enr_up_fail_name(ENR_UP_NFAILS), "unknown");
}

/* A pause holds every worker's calls, so no kind that stands for one
 * feeds a breaker; the ranks the scoreboard stores are 1..n, each once. */
static void test_pauses(void)
{
    unsigned n = 0;
    char words[128], want[128] = "";

    for (int k = 0; k < ENR_UP_NFAILS; k++) {
        const enr_up_fail_row *r = &enr_up_fail_rows[k];
        if (r->pause == 0)
            continue;
        n++;
        T_CHECK(r->breaker == 0, "%s: a pause never feeds the breaker", r->word);
        T_CHECK(enr_up_fail_of_pause(r->pause) == k, "%s: its rank names it", r->word);
        T_STREQ(enr_up_pause_name(r->pause), r->word);
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", want[0] ? ", " : "",
                 r->word);
    }
    T_CHECK(n > 0, "some kinds are pauses");
    for (unsigned rank = 1; rank <= n; rank++)
        T_CHECK(enr_up_fail_of_pause(rank) >= 0, "rank %u of 1..%u names a kind", rank, n);
    T_CHECK(enr_up_fail_of_pause(0) == -1 && enr_up_fail_of_pause(n + 1) == -1, "no others");
    T_STREQ(enr_up_pause_name(0), "none");
    T_STREQ(enr_up_pause_name(n + 1), "unknown");
    enr_up_pause_words(words, sizeof words);
    T_STREQ(words, want);
    /* What the surfaces have always said, word for word. */
    T_STREQ(words, "throttled, quota, auth");
    enr_up_pause_words(words, 12);
    T_CHECK(strlen(words) < 12, "bounded by its buffer: \"%s\"", words);
}

int main(void)
{
    test_rows();
    test_pauses();
    T_DONE();
}
