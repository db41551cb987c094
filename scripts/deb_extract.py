#!/usr/bin/env python3
"""Unpacks the data of Debian packages into a folder, like `dpkg -x PKG DIR`, for machines without
dpkg (scripts/gpu-build.sh uses it when dpkg-deb is missing). Standard library only.

A .deb is an `ar` archive: "!<arch>\\n", then members of a 60-byte header (name 16, mtime 12,
uid 6, gid 6, mode 8, size 10, magic "`\\n") and `size` bytes of data, padded to an even offset.
The files are in the member data.tar.{xz,gz,bz2} (or an uncompressed data.tar).

    deb_extract.py DIR PKG.deb...
"""
import io
import os
import sys
import tarfile

AR_MAGIC = b"!<arch>\n"
HEADER = 60


def ar_members(blob):
    """Yields (name, data) of each member of an ar archive held in `blob` (bytes)."""
    if not blob.startswith(AR_MAGIC):
        raise ValueError("not an ar archive (bad magic)")
    off = len(AR_MAGIC)
    while off < len(blob):
        if off + HEADER > len(blob):
            raise ValueError(f"truncated ar header at offset {off}")
        h = blob[off:off + HEADER]
        if h[58:60] != b"`\n":
            raise ValueError(f"bad ar member header at offset {off}")
        name = h[0:16].decode("ascii").strip().rstrip("/")
        size = int(h[48:58].decode("ascii").strip())
        start = off + HEADER
        if start + size > len(blob):
            raise ValueError(f"ar member {name!r} runs past the end of the file")
        yield name, blob[start:start + size]
        off = start + size + (size & 1)


def data_tar(deb_bytes, what="package"):
    """The data.tar member of a .deb as an open tarfile."""
    for name, data in ar_members(deb_bytes):
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                raise ValueError(f"{what}: {name} is zstd-compressed, which Python cannot read")
            return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    raise ValueError(f"{what}: no data.tar member")


def extract(deb_path, dest):
    """Unpacks the files of `deb_path` below `dest` (paths stay relative: ./usr/... -> dest/usr)."""
    with open(deb_path, "rb") as f:
        blob = f.read()
    dest_real = os.path.realpath(dest)
    with data_tar(blob, deb_path) as tar:
        members = []
        for m in tar.getmembers():
            target = os.path.realpath(os.path.join(dest_real, m.name))
            if target != dest_real and not target.startswith(dest_real + os.sep):
                raise ValueError(f"{deb_path}: member {m.name!r} would land outside {dest}")
            members.append(m)
        # Python >= 3.12 wants an extraction filter; "tar" keeps symlinks and modes.
        kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
        tar.extractall(dest_real, members=members, **kwargs)


def main(argv):
    if len(argv) < 3:
        print("usage: deb_extract.py DIR PKG.deb...", file=sys.stderr)
        return 2
    dest = argv[1]
    os.makedirs(dest, exist_ok=True)
    for deb in argv[2:]:
        try:
            extract(deb, dest)
        except (OSError, ValueError, tarfile.TarError) as e:
            print(f"deb_extract: {deb}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
