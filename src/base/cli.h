/*
 * cli.h: what the command-line programs of src/cmd/ share (see cli.c).
 */
#ifndef ENR_CLI_H
#define ENR_CLI_H

#include <stdio.h>

/* Exit codes of a program's command line (besides 0 and 1, a failure). */
#define ENR_CLI_USAGE 2 /* a usage mistake: unknown option, missing operand */

/* Prints a program's usage and returns the exit code to give: on stdout
 * for code 0 (-h, asked for), on stderr otherwise (a mistake). */
int enr_cli_usage(void (*usage)(FILE *f), int code);

#endif
