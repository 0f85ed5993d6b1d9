#include "cmd/cmd.h"

int cmd_runs(int argc, const char **argv)
{
    (void)argc;
    (void)argv;
    return nb_die("'runs' is being built");
}
