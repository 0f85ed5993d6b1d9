#include "cmd/cmd.h"

int cmd_run(int argc, const char **argv)
{
    (void)argc;
    (void)argv;
    return nb_die("'run' is being built");
}
