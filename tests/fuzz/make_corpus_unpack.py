#!/usr/bin/env python3
"""Writes the unpack seed corpus (tests/fuzz/corpus/unpack/): small tar, tar.gz and zip
archives holding the members fuzz_unpack.c expects, plus hostile entries (.., absolute path,
symlink, device, an extra file). Run from the repository root; the output is committed."""
import gzip
import io
import os
import tarfile
import zipfile

out = "tests/fuzz/corpus/unpack"
os.makedirs(out, exist_ok=True)


def tar(entries, gz=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, kind, data in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 0
            if kind == "file":
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif kind == "sym":
                ti.type = tarfile.SYMTYPE
                ti.linkname = data
                t.addfile(ti)
            elif kind == "chr":
                ti.type = tarfile.CHRTYPE
                ti.devmajor, ti.devminor = 1, 3
                t.addfile(ti)
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if gz else raw


def put(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


good = [("top/", "dir", b""), ("top/a.txt", "file", b"hello\nworld\n"),
        ("top/images/10crop/b.npy", "file", b"\x93NUMPY\x01\x00" + b"x" * 40)]
put("good.tar", tar(good))
put("good.tar.gz", tar(good, gz=True))
put("hostile.tar", tar([("../x", "file", b"x"), ("/tmp/abs", "file", b"x"),
                        ("top/a.txt", "sym", "/etc/passwd"), ("dev", "chr", b""),
                        ("top/extra.bin", "file", b"y" * 100)]))
zbuf = io.BytesIO()
with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("a.txt", b"caption one\n" * 5)
    z.writestr("images/10crop/b.npy", b"\x93NUMPY\x01\x00" + b"\x00" * 64)
    z.writestr("images/1crop/c.npy", b"skipped")
put("good.zip", zbuf.getvalue())
