/* tests/fuzz/fuzz_bpe.c — libFuzzer target for the translation text path (datasets/bpe.c,
 * datasets/mt.c): the input is split at its first NUL byte into BPE codes and text. Codes are
 * refused or parsed; the text's lines are refused (a NUL) or parsed; every line then goes
 * through pre-tokenization and BPE and must decode back to itself (exactly, unless a marker
 * character was replaced), with every piece non-empty and free of spaces. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/mt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *buf = (const char *)data;
    const char *nul = memchr(buf, '\0', size);
    size_t ncodes = nul ? (size_t)(nul - buf) : size;
    nb_err err;
    nb_bpe *b = nb_bpe_parse(buf, ncodes, "codes", &err);
    if (!b) b = nb_bpe_parse("", 0, "codes", &err);
    if (!b) abort();
    const char *text = nul ? nul + 1 : "";
    size_t ntext = nul ? size - ncodes - 1 : 0;
    nb_lines l;
    if (nb_lines_parse(text, ntext, "text", &l, &err) == 0) {
        nb_toks p = {0};
        for (int i = 0; i < l.n; i++) {
            long reserved = 0;
            if (nb_bpe_encode_line(b, l.line[i], l.len[i], &p, &reserved, &err)) abort();
            for (int k = 0; k < p.n; k++)
                if (!p.tok[k][0] || strchr(p.tok[k], ' ')) abort();
            char *out = nb_bpe_decode(p.tok, p.n);
            if (!out) abort();
            if (reserved == 0 && strcmp(out, l.line[i]) != 0) abort();
            free(out);
        }
        nb_toks_free(&p);
        nb_lines_free(&l);
    }
    nb_bpe_free(b);
    return 0;
}
