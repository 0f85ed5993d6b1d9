/* tests/fuzz/fuzz_json.c — libFuzzer target for the JSON object reader (util/json.c): any input
 * is read without a crash or an overrun, and what it returns is consistent: every member has a
 * key and a value, a string value holds no NUL, and a whole object read a second time gives the
 * same members. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    nb_json_object o, again;
    int rc = nb_json_read_object(s, &o);
    if (o.n < 0 || (o.n > 0 && !o.kv)) abort();
    for (int i = 0; i < o.n; i++) {
        if (!o.kv[i].key || !o.kv[i].value) abort();
        if (!o.kv[i].is_string && !o.kv[i].value[0]) abort(); /* a value is never empty */
        if (nb_json_get(&o, o.kv[i].key) == NULL) abort();
        long long v;
        nb_json_get_int(&o, o.kv[i].key, &v);
    }
    if (rc == 0) {
        if (nb_json_read_object(s, &again) != 0 || again.n != o.n) abort();
        for (int i = 0; i < o.n; i++)
            if (strcmp(o.kv[i].key, again.kv[i].key) || strcmp(o.kv[i].value, again.kv[i].value))
                abort();
        nb_json_object_free(&again);
    }
    nb_json_object_free(&o);
    free(s);
    return 0;
}
