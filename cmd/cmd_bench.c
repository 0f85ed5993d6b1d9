#include "cmd/cmd.h"

int cmd_bench(int argc, const char **argv)
{
    (void)argc;
    (void)argv;
    return nb_die("'bench' is being built");
}
