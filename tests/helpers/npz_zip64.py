#!/usr/bin/python3
"""An .npz archive rewritten with the zip64 records that archives past 4 GiB
or 65535 members carry, its members unchanged:

  npz_zip64.py end IN OUT       a zip64 end record and locator, the plain end
                                record's fields full
  npz_zip64.py central IN OUT   every member written again by Python's zipfile
                                with its zip64 limit lowered to 100 bytes: the
                                central directory's sizes and offsets full,
                                their values in zip64 extra fields (as a day
                                of MLPerf's multi-hot data has them)
"""
import struct
import sys
import zipfile


def end_record(src, dst):
    b = open(src, "rb").read()
    end = b.rfind(b"PK\x05\x06")
    _, _, _, _, n, cd_size, cd_off, _ = struct.unpack("<IHHHHIIH", b[end:end + 22])
    end64 = struct.pack("<IQHHIIQQQQ", 0x06064b50, 44, 45, 45, 0, 0, n, n, cd_size, cd_off)
    loc = struct.pack("<IIQI", 0x07064b50, 0, end, 1)
    rec = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    open(dst, "wb").write(b[:end] + end64 + loc + rec)


def central(src, dst):
    zipfile.ZIP64_LIMIT = 100
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for name in zin.namelist():
            with zout.open(name, "w", force_zip64=True) as f:
                f.write(zin.read(name))


if __name__ == "__main__":
    {"end": end_record, "central": central}[sys.argv[1]](sys.argv[2], sys.argv[3])
