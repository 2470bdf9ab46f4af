/*
 * bench-activate.c: the bench's stand-in for systemd's start of a
 * socket-activated service.  systemd forks, sets LISTEN_PID to the
 * child's pid and execs the service; a client that cannot run code
 * between its fork and the exec (posix_spawn) runs this instead:
 *
 *   bench-activate PROGRAM [ARG...]
 *
 * sets LISTEN_PID to its own pid, which PROGRAM keeps across execv(), and
 * execs PROGRAM with the rest of the environment as given (LISTEN_FDS,
 * LISTEN_FDNAMES; the descriptors from 3 on are the caller's to place).
 * Linked statically so that its own start is nearly free: the shell the
 * bench ran for this before (`sh -c 'LISTEN_PID=$$ exec ...'`) cost 56
 * page faults more than the program alone, this 25: a part of every
 * measured cold start that systemd does not have.  A bench tool only: never installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char pid[24];

    if (argc < 2) {
        fputs("usage: bench-activate PROGRAM [ARG...]\n", stderr);
        return 2;
    }
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (setenv("LISTEN_PID", pid, 1) != 0) {
        perror("bench-activate: setenv");
        return 1;
    }
    execv(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
