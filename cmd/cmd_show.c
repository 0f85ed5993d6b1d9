#include "cmd/cmd.h"

int cmd_show(int argc, const char **argv)
{
    (void)argc;
    (void)argv;
    return nb_die("'show' is being built");
}
