#!/usr/bin/python3
"""Rewrite an .npz archive's end record as zip64 (a zip64 end record and
locator, the plain end record's fields full), as archives past 4 GiB or 65535
members carry it: npz_zip64.py IN OUT. The members are unchanged."""
import struct
import sys


def main():
    b = open(sys.argv[1], "rb").read()
    end = b.rfind(b"PK\x05\x06")
    _, disk, disk_cd, n_disk, n, cd_size, cd_off, clen = struct.unpack("<IHHHHIIH", b[end:end + 22])
    end64_at = end
    end64 = struct.pack("<IQHHIIQQQQ", 0x06064b50, 44, 45, 45, 0, 0, n, n, cd_size, cd_off)
    loc = struct.pack("<IIQI", 0x07064b50, 0, end64_at, 1)
    rec = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    open(sys.argv[2], "wb").write(b[:end] + end64 + loc + rec)


if __name__ == "__main__":
    main()
