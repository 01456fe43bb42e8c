#!/usr/bin/env python3
"""Checks that a screenshot is a real rendering: a PNG of the expected size
that is not blank (many colours, ink spread over the page). Standard library
only, so the test needs nothing beyond python3.

    check_png.py FILE WIDTH HEIGHT
"""
import struct
import sys
import zlib


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG file")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace != 0:
        raise SystemExit(f"{path}: unexpected PNG layout (depth {depth}, colour type {color}, interlace {interlace})")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if filt == 1:
                line[i] = (line[i] + a) & 0xFF
            elif filt == 2:
                line[i] = (line[i] + b) & 0xFF
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    width, height, bpp, rows = read_png(path)
    if (width, height) != (want_w, want_h):
        raise SystemExit(f"{path}: {width}x{height}, expected {want_w}x{want_h}")
    colours, inked_bands, reddish = set(), set(), 0
    inked = total = 0
    for y in range(0, height, 2):
        row = rows[y]
        for x in range(0, width, 2):
            r, g, b = row[x * bpp], row[x * bpp + 1], row[x * bpp + 2]
            colours.add((r >> 3, g >> 3, b >> 3))
            total += 1
            if r < 200 or g < 200 or b < 200:
                inked += 1
                inked_bands.add(y * 20 // height)
            if r > 150 and g < 90 and b < 90:
                reddish += 1
    share = inked / total
    print(f"{path}: {width}x{height}, {len(colours)} colours, {share:.1%} ink, ink in {len(inked_bands)} of 20 bands, "
          f"{reddish} strong red samples")
    if len(colours) < 40:
        raise SystemExit(f"{path}: only {len(colours)} colours: the page looks blank")
    if share < 0.02:
        raise SystemExit(f"{path}: {share:.1%} of the page is ink: the page looks blank")
    if len(inked_bands) < 8:
        raise SystemExit(f"{path}: content in only {len(inked_bands)} of 20 horizontal bands")
    if reddish < 50:
        raise SystemExit(f"{path}: no strong red anywhere: the divergence is not highlighted")


if __name__ == "__main__":
    main()
