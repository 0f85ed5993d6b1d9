"""Writes reference tensors in the format tests/ref.h reads (see there)."""
import struct

import numpy as np


def write(path, tensors):
    """tensors: list of (name, array-like); arrays are written as float64, C order."""
    with open(path, "wb") as f:
        for name, arr in tensors:
            a = np.ascontiguousarray(np.asarray(arr, dtype=np.float64))
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)))
            f.write(nb)
            f.write(struct.pack("<I", a.ndim))
            for d in a.shape:
                f.write(struct.pack("<I", d))
            f.write(a.astype("<f8").tobytes())


def read(path):
    """The records of a file in the same format, as {name: float64 array}."""
    out = {}
    with open(path, "rb") as f:
        while True:
            b = f.read(4)
            if len(b) < 4:
                break
            (n,) = struct.unpack("<I", b)
            name = f.read(n).decode()
            (nd,) = struct.unpack("<I", f.read(4))
            dims = struct.unpack("<%dI" % nd, f.read(4 * nd))
            count = int(np.prod(dims)) if nd else 1
            out[name] = np.frombuffer(f.read(8 * count), dtype="<f8").reshape(dims)
    return out
