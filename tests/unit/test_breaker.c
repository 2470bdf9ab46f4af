/*
 * test_breaker.c: the breaker's state machine, driven with a hand clock.
 */
#include "upstream/breaker.h"
#include "t.h"

/* An upstream that fails every other call never trips the consecutive
 * rule; the window rule opens on it, and only once the window is full. */
static void test_window(void)
{
    enr_breaker br;
    int prev, i;

    enr_breaker_init(&br, 5, 1000);
    enr_breaker_set_window(&br, 10, 0.5);
    for (i = 0; i < 9; i++) {
        T_CHECK(enr_breaker_allow(&br, 0, &prev) == 1, "call %d allowed", i);
        if (i % 2)
            enr_breaker_success(&br, 0);
        else
            enr_breaker_failure(&br, 0);
    }
    T_CHECK(br.state == ENR_BREAKER_CLOSED, "5 of 9 failed, window not full: still closed");
    enr_breaker_success(&br, 0); /* 10th: 5 of 10 failed = 0.5 */
    T_CHECK(br.state == ENR_BREAKER_CLOSED, "judged on a failure, not on a success");
    enr_breaker_failure(&br, 0); /* the oldest (a failure) leaves: still 5 of 10 */
    T_CHECK(br.state == ENR_BREAKER_OPEN && br.opens == 1, "ratio 0.5 over 10 calls opens it");

    /* the probe closes it and the window starts empty */
    T_CHECK(enr_breaker_allow(&br, 1000, &prev) == 1 && br.state == ENR_BREAKER_HALF_OPEN, "probe");
    enr_breaker_success(&br, 1000);
    T_CHECK(br.state == ENR_BREAKER_CLOSED && br.ring_n == 0, "closed, window emptied");
    for (i = 0; i < 4; i++)
        enr_breaker_failure(&br, 1000);
    T_CHECK(br.state == ENR_BREAKER_CLOSED, "4 failures after closing: below both rules");

    /* mostly healthy traffic never opens it */
    enr_breaker_init(&br, 5, 1000);
    enr_breaker_set_window(&br, 20, 0.5);
    for (i = 0; i < 1000; i++) {
        if (i % 3 == 0)
            enr_breaker_failure(&br, 0);
        else
            enr_breaker_success(&br, 0);
    }
    T_CHECK(br.state == ENR_BREAKER_CLOSED && br.opens == 0, "1 in 3 failing stays closed");

    /* window 0: only the consecutive rule */
    enr_breaker_init(&br, 3, 1000);
    enr_breaker_set_window(&br, 0, 0.5);
    for (i = 0; i < 100; i++) {
        if (i % 2)
            enr_breaker_success(&br, 0);
        else
            enr_breaker_failure(&br, 0);
    }
    T_CHECK(br.state == ENR_BREAKER_CLOSED, "window off: alternating failures never open it");
    enr_breaker_set_window(&br, 1000, 0.5);
    T_CHECK(br.window == ENR_BREAKER_WINDOW_MAX, "window clamped to %d", ENR_BREAKER_WINDOW_MAX);
}

int main(void)
{
    test_window();
    enr_breaker br;
    int prev;

    enr_breaker_init(&br, 3, 1000);
    T_CHECK(br.state == ENR_BREAKER_CLOSED, "starts closed");
    T_CHECK(enr_breaker_allow(&br, 0, &prev) == 1, "closed allows");

    /* failures must be consecutive: a success in between resets */
    enr_breaker_failure(&br, 10);
    enr_breaker_failure(&br, 11);
    enr_breaker_success(&br, 12);
    enr_breaker_failure(&br, 13);
    enr_breaker_failure(&br, 14);
    T_CHECK(br.state == ENR_BREAKER_CLOSED, "2 consecutive failures keep it closed");
    prev = enr_breaker_failure(&br, 15);
    T_CHECK(prev == ENR_BREAKER_CLOSED && br.state == ENR_BREAKER_OPEN, "3rd failure opens");
    T_CHECK(br.opens == 1, "opens counted: %llu", (unsigned long long)br.opens);

    T_CHECK(enr_breaker_allow(&br, 16, &prev) == 0, "open skips calls");
    T_CHECK(enr_breaker_allow(&br, 1014, &prev) == 0, "still open 1 ms before cooldown");
    T_CHECK(br.state == ENR_BREAKER_OPEN, "still open");

    T_CHECK(enr_breaker_allow(&br, 1015, &prev) == 1, "cooldown over: one probe");
    T_CHECK(prev == ENR_BREAKER_OPEN && br.state == ENR_BREAKER_HALF_OPEN, "half_open");
    T_CHECK(enr_breaker_allow(&br, 1016, &prev) == 0, "only one probe in half_open");
    T_CHECK(enr_breaker_allow(&br, 5000, &prev) == 0, "still one probe, however long");

    prev = enr_breaker_failure(&br, 1100);
    T_CHECK(prev == ENR_BREAKER_HALF_OPEN && br.state == ENR_BREAKER_OPEN, "failed probe reopens");
    T_CHECK(br.opens == 2, "reopen counted");
    T_CHECK(enr_breaker_allow(&br, 1500, &prev) == 0, "cooldown restarts at the reopen");
    T_CHECK(enr_breaker_allow(&br, 2100, &prev) == 1, "second probe after cooldown");
    prev = enr_breaker_success(&br, 2101);
    T_CHECK(prev == ENR_BREAKER_HALF_OPEN && br.state == ENR_BREAKER_CLOSED,
            "probe success closes");
    T_CHECK(enr_breaker_allow(&br, 2102, &prev) == 1 && enr_breaker_allow(&br, 2102, &prev) == 1,
            "closed allows every call");

    /* a straggler's success while open must not close it */
    enr_breaker_failure(&br, 3000);
    enr_breaker_failure(&br, 3000);
    enr_breaker_failure(&br, 3000);
    T_CHECK(br.state == ENR_BREAKER_OPEN, "open again");
    enr_breaker_success(&br, 3001);
    T_CHECK(br.state == ENR_BREAKER_OPEN, "success of an old call does not close an open breaker");
    enr_breaker_failure(&br, 3500);
    T_CHECK(br.opens == 3 && br.opened_ms == 3000, "failure while open is not a new opening");

    /* threshold 0 is read as 1 */
    enr_breaker_init(&br, 0, 0);
    enr_breaker_failure(&br, 1);
    T_CHECK(br.state == ENR_BREAKER_OPEN, "threshold 0 opens on the first failure");
    T_CHECK(enr_breaker_allow(&br, 1, &prev) == 1, "cooldown 0: probe at once");

    T_STREQ(enr_breaker_state_name(ENR_BREAKER_HALF_OPEN), "half_open");
    T_DONE();
}
