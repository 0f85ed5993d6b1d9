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
