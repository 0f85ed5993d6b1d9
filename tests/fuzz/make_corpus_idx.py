#!/usr/bin/env python3
"""Writes the IDX seed corpus (tests/fuzz/corpus/idx/): small valid files, plain and gzip,
images (3 dims) and labels (1 dim), plus near misses. Run from the repository root; the output
is committed, so CI does not need this script."""
import gzip
import os
import struct

out = "tests/fuzz/corpus/idx"
os.makedirs(out, exist_ok=True)


def idx(ndims, dims, data):
    return struct.pack(">BBBB", 0, 0, 8, ndims) + b"".join(struct.pack(">I", d) for d in dims) + data


def put(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


img = idx(3, [2, 4, 4], bytes(range(32)))
lab = idx(1, [5], bytes([0, 1, 9, 3, 7]))
put("images-2x4x4", img)
put("labels-5", lab)
put("images-1x28x28", idx(3, [1, 28, 28], bytes((i * 7) & 255 for i in range(784))))
put("images-2x4x4.gz", gzip.compress(img, mtime=0))
put("labels-5.gz", gzip.compress(lab, mtime=0))
put("labels-trailing", lab + b"\x00\x01")
put("images-truncated", img[:-3])
put("huge-claim", idx(3, [60000, 2800, 28], b"\x00" * 16))
put("empty.gz", gzip.compress(b"", mtime=0))
