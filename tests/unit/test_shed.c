/*
 * test_shed.c: nginx's $msec parsed exactly or not at all, the queue
 * wait it gives (clock disagreements taken as unknown), the shedding
 * rule and its Retry-After.
 */
#include "pool/shed.h"
#include "t.h"

static void test_parse(void)
{
    static const struct {
        const char *text;
        int ok;
        uint64_t ms;
    } cases[] = {
        {"1700000000.123", 1, 1700000000123ULL},
        {"1700000000.1", 1, 1700000000100ULL},
        {"1700000000.12", 1, 1700000000120ULL},
        {"1700000000", 1, 1700000000000ULL},
        {"0.000", 1, 0},
        {"999999999999.999", 1, 999999999999999ULL},
        {"", 0, 0},
        {".123", 0, 0},
        {"1700000000.", 0, 0},
        {"1700000000.1234", 0, 0},
        {"-1700000000.123", 0, 0},
        {"+1700000000.123", 0, 0},
        {" 1700000000.123", 0, 0},
        {"1700000000.123 ", 0, 0},
        {"1700000000,123", 0, 0},
        {"1e9", 0, 0},
        {"1234567890123.000", 0, 0},
        {"1700000000.12a", 0, 0},
    };
    uint64_t ms;

    T_CHECK(enr_shed_parse_msec(NULL, &ms) == -1, "NULL is no time");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc;
        ms = 77;
        rc = enr_shed_parse_msec(cases[i].text, &ms);
        T_CHECK((rc == 0) == cases[i].ok, "%s: %s", cases[i].text, rc == 0 ? "taken" : "refused");
        if (cases[i].ok)
            T_CHECK(ms == cases[i].ms, "%s -> %llu", cases[i].text, (unsigned long long)ms);
        else
            T_CHECK(ms == 77, "%s: refused without writing", cases[i].text);
    }
}

static void test_wait(void)
{
    int known = 7;
    uint64_t now = 1700000001500ULL;

    T_CHECK(enr_shed_wait_ms("1700000000.250", now, &known) == 1250 && known == 1, "waited 1250");
    T_CHECK(enr_shed_wait_ms("1700000001.500", now, &known) == 0 && known == 1, "waited 0");
    T_CHECK(enr_shed_wait_ms(NULL, now, &known) == 0 && known == 0, "absent: unknown");
    T_CHECK(enr_shed_wait_ms("soon", now, &known) == 0 && known == 0, "garbage: unknown");
    T_CHECK(enr_shed_wait_ms("1700000002.000", now, &known) == 0 && known == 0,
            "nginx's clock ahead: unknown");
    T_CHECK(enr_shed_wait_ms("1699999000.000", now, &known) == 0 && known == 0,
            "a wait past ENR_SHED_WAIT_SANE_MS is two clocks disagreeing: unknown");
    T_CHECK(enr_shed_wait_ms("1700000000.500", now, NULL) == 1000, "known may be NULL");
}

static void test_rule(void)
{
    enr_config c;

    memset(&c, 0, sizeof c);
    c.queue_timeout_ms = 0;
    T_CHECK(!enr_shed_due(&c, 1000000), "0: never shed");
    T_CHECK(enr_shed_retry_after_s(&c) == 1, "Retry-After at least 1");
    c.queue_timeout_ms = 300;
    T_CHECK(!enr_shed_due(&c, 300) && enr_shed_due(&c, 301), "shed past 300, not at it");
    T_CHECK(enr_shed_retry_after_s(&c) == 1, "300 ms: Retry-After 1");
    c.queue_timeout_ms = 2001;
    T_CHECK(enr_shed_retry_after_s(&c) == 3, "2001 ms: Retry-After 3 (rounded up)");
}

int main(void)
{
    test_parse();
    test_wait();
    test_rule();
    T_DONE();
}
