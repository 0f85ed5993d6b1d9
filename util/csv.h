/* util/csv.h — reading back the CSV that normbench writes (RFC 4180 as util/json.h's
 * nb_csv_field writes a field: quoted, with quotes doubled, when it holds a comma or a quote;
 * never a line break inside a field). */
#ifndef NB_UTIL_CSV_H
#define NB_UTIL_CSV_H

/* Splits the record line (one line, NUL-terminated, without its line break) into its fields, in
 * place: fields[i] points into line, quotes removed and doubled quotes made single. Returns the
 * number of fields (at most max; more is an error), or -1 with *why set to what is wrong (a
 * quote inside an unquoted field, text after a closing quote, a quote not closed, too many
 * fields). */
int nb_csv_split(char *line, char **fields, int max, const char **why);

#endif
