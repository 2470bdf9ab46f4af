/*
 * test_signals.c: signals.c on real processes: a rule's flag, a noted
 * signal that ends nothing, a fault signal sent by hand noted, and a
 * real fault still ending the process with its signal; the names.
 */
#include "base/signals.h"
#include "t.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_MS 3000

static volatile sig_atomic_t got_term;

static const enr_sig_rule rules[] = {
    {SIGTERM, ENR_SIG_FLAG, &got_term, NULL},
    {SIGPIPE, ENR_SIG_IGNORE, NULL, NULL},
};

enum fault { NO_FAULT, FAULT_SEGV, FAULT_FPE };

/* A child with the rules installed: it sends itself every signal in
 * sent, then faults as asked (or not), and exits 0 when got_term is set
 * and it is still alive. */
static pid_t child(const int *sent, size_t n, enum fault f)
{
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    {
        struct rlimit none = {0, 0}; /* the fault cases leave no core file behind */
        sigset_t handled;
        setrlimit(RLIMIT_CORE, &none);
        if (enr_signals_install(rules, sizeof rules / sizeof rules[0], &handled) != 0)
            _exit(10);
        for (size_t i = 0; i < n; i++)
            if (kill(getpid(), sent[i]) != 0) /* delivered before kill returns */
                _exit(11);
        if (f == FAULT_SEGV) {
            int *volatile nowhere = NULL;
            *(volatile int *)nowhere = 1; /* volatile: the store is made */
        }
        if (f == FAULT_FPE) {
            volatile int num = 7, zero = 0;
            volatile int x = num / zero; /* both read at run time: a real idiv */
            (void)x;
        }
        kill(getpid(), SIGTERM);
        _exit(got_term ? 0 : 12);
    }
}

static void test_noted_signals_end_nothing(void)
{
    static const int sent[] = {SIGUSR1, SIGUSR2, SIGXFSZ,  SIGALRM, SIGVTALRM, SIGPROF,
                               SIGIO,   SIGPWR,  SIGTSTP,  SIGTTIN, SIGTTOU,   SIGSEGV,
                               SIGBUS,  SIGFPE,  SIGILL,   SIGTRAP, SIGSYS,    SIGPIPE,
                               SIGHUP,  SIGINT,  SIGWINCH, SIGURG};
    int st = 0;
    pid_t pid = child(sent, sizeof sent / sizeof sent[0], NO_FAULT);

    T_CHECK(pid > 0 && t_wait_child(pid, CHILD_MS, &st) == 0, "the child ends in time");
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
            "every noted signal, faults sent by hand included, leaves it alive, and TERM sets "
            "its flag (status %#x)",
            st);
}

/* clang says it builds with ASan through __has_feature, gcc through
 * __SANITIZE_ADDRESS__. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ENR_T_HAS_ASAN 1
#endif
#endif
#ifndef ENR_T_HAS_ASAN
#define ENR_T_HAS_ASAN 0
#endif

static void test_real_faults_still_end_it(void)
{
    static const struct {
        enum fault f;
        int sig;
    } cases[] = {{FAULT_SEGV, SIGSEGV}, {FAULT_FPE, SIGFPE}};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = 0;
        pid_t pid = child(NULL, 0, cases[i].f);
        int ended;
        T_CHECK(pid > 0 && t_wait_child(pid, CHILD_MS, &st) == 0, "the child ends in time");
        ended = WIFSIGNALED(st) && WTERMSIG(st) == cases[i].sig;
#if defined(__SANITIZE_ADDRESS__) || ENR_T_HAS_ASAN
        /* The sanitizers' handlers (the action before ours) report the
         * fault and exit 1, or abort (ASAN_OPTIONS=abort_on_error=1). */
        ended = ended || (WIFEXITED(st) && WEXITSTATUS(st) == 1) ||
                (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
#endif
        T_CHECK(ended, "a real fault ends the process with its signal %d (status %#x)",
                cases[i].sig, st);
    }
}

static void test_names(void)
{
    char b[16];

    T_STREQ(enr_signal_name(SIGUSR1, b, sizeof b), "USR1");
    T_STREQ(enr_signal_name(SIGRTMIN + 3, b, sizeof b), "RTMIN+3");
    T_STREQ(enr_signal_name(SIGIO, b, sizeof b), "POLL");
}

int main(void)
{
    test_noted_signals_end_nothing();
    test_real_faults_still_end_it();
    test_names();
    T_DONE();
}
