#include "cmd/cmd.h"

int cmd_report(int argc, const char **argv)
{
    (void)argc;
    (void)argv;
    return nb_die("'report' is being built");
}
