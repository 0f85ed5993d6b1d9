/* cmd/progress.h — training progress on stderr: a live line redrawn at most 10 times a second
 * when stderr is a terminal, plain log lines (each epoch's evaluation and every 10 s) when it
 * is not. */
#ifndef NB_CMD_PROGRESS_H
#define NB_CMD_PROGRESS_H

#include "tasks/task.h"

typedef struct nb_progress_line {
    int quiet, tty, width, drawn;
    double last_draw, last_plain;
    int last_epoch_logged;
} nb_progress_line;

void nb_progress_init(nb_progress_line *pl, int quiet);
void nb_progress_draw(nb_progress_line *pl, const nb_progress *p);
/* Ends a live line (newline) so later messages start on their own line. */
void nb_progress_end(nb_progress_line *pl);

#endif
