/* util/csv.c — see util/csv.h. */
#include "util/csv.h"

#include <stddef.h>

int nb_csv_split(char *line, char **fields, int max, const char **why) {
    int n = 0;
    char *r = line; /* reading */
    for (;;) {
        if (n >= max) {
            *why = "too many fields";
            return -1;
        }
        char *w = r; /* the field is decoded in place, from its first byte */
        fields[n++] = w;
        if (*r == '"') {
            r++;
            for (;;) {
                if (*r == '\0') {
                    *why = "a quoted field is not closed";
                    return -1;
                }
                if (*r == '"') {
                    if (r[1] == '"') {
                        *w++ = '"';
                        r += 2;
                        continue;
                    }
                    r++;
                    break;
                }
                *w++ = *r++;
            }
            if (*r != ',' && *r != '\0') {
                *why = "text after a quoted field's closing quote";
                return -1;
            }
        } else {
            while (*r && *r != ',') {
                if (*r == '"') {
                    *why = "a quote inside a field that is not quoted";
                    return -1;
                }
                *w++ = *r++;
            }
        }
        char end = *r;
        *w = '\0';
        if (end == '\0') return n;
        r++; /* past the comma (w <= r - 1: the terminator does not overwrite it) */
    }
}
