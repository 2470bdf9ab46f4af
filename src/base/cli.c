/*
 * cli.c: the answer of the command-line programs to -h and to a usage
 * mistake, in one place so that they all behave alike: -h prints the
 * usage on stdout and exits 0; an unknown option or a missing operand
 * prints it on stderr and exits ENR_CLI_USAGE (2), as GNU tools do, so a
 * script tells a mistake from a failure (1).
 */
#include "base/cli.h"

int enr_cli_usage(void (*usage)(FILE *f), int code)
{
    usage(code == 0 ? stdout : stderr);
    return code;
}
