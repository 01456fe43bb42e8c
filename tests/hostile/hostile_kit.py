"""Low-level helpers for crafting hostile gpurr trace directories
(trace_format/FORMAT.md) byte by byte: headers, zstd frames, block headers,
index entries, Cap'n Proto pointer aliasing, templated event frames and
streamed zero blobs. Used by hostile_cases.py; run with the gpurr venv's
Python (pycapnp, zstandard, xxhash), e.g. /opt/gpurr-venv/bin/python.
Ported from an earlier resource-exhaustion audit's helpers."""
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'outside_writer'))
from gpurr_outside import trace as otrace  # noqa: E402
import capnp  # noqa: E402
import xxhash  # noqa: E402
import zstandard  # noqa: E402

S = otrace.schema()
MAGIC = 0x4b4c425252555047
SEQ_T = 0x1111111111111111     # placeholder seq of a template frame
TIME_T = 0x2222222222222222    # placeholder timeNs of a template frame


def header_bytes(**over):
    """A valid Header message; keyword arguments replace its fields."""
    h = {'formatVersion': 1, 'compatVersion': 13, 'toolVersion': 'hostile', 'commandLine': ['x'],
         'hostname': 'h', 'pid': 1, 'rank': 0,
         'gpus': [{'ordinal': 0, 'name': 'G', 'uuid': 'GPU-0', 'smCount': 1, 'ccMajor': 9, 'ccMinor': 0,
                   'memoryBytes': 1 << 30}],
         'options': {'hashInputs': True, 'hashChunkBytes': 65536}}
    h.update(over)
    return S.Header.new_message(**h).to_bytes()


def frame_event(ev, first_words=None):
    """One Frame{event} message (with its segment table). first_words makes
    the first segment that large, so that a big event stays single-segment."""
    if first_words:
        mb = capnp._MallocMessageBuilder(first_words)
        root = mb.init_root(S.Frame)
        root.event = ev
        segs = mb.get_segments_for_output()
        table = struct.pack('<I', len(segs) - 1) + b''.join(struct.pack('<I', len(x) // 8) for x in segs)
        if len(table) % 8:
            table += b'\0' * 4
        return table + b''.join(bytes(x) for x in segs)
    return S.Frame.new_message(event=ev).to_bytes()


def frame_function(fid, name, module=0):
    """One Frame{function} message declaring block-local function fid."""
    return S.Frame.new_message(function={'id': fid, 'module': module, 'name': name}).to_bytes()


def zframe(raw, level=3, content_size=True, checksum=True, window_log=None):
    """One zstd frame of raw. window_log (at most 27, what readers accept)
    lets repeats further apart than the level's window compress too."""
    if window_log:
        params = zstandard.ZstdCompressionParameters.from_level(
            level, window_log=window_log, write_content_size=int(content_size), write_checksum=int(checksum))
        return zstandard.ZstdCompressor(compression_params=params).compress(raw)
    return zstandard.ZstdCompressor(level=level, write_content_size=content_size,
                                    write_checksum=checksum).compress(raw)


def block_header(csize, usize, first_seq, events, launches, t0=0, t1=0):
    b = S.BlockHeader.new_message(magic=MAGIC, compressedSize=csize, uncompressedSize=usize,
                                  firstSeq=first_seq, eventCount=events, launchCount=launches,
                                  firstTimeNs=t0, lastTimeNs=t1).to_bytes()
    assert len(b) == 64
    return b


class Trace:
    """Builds a trace directory at `path` block by block, with raw control
    over every field (sizes, counts, frames)."""

    def __init__(self, path, header=None):
        self.path = path
        if os.path.lexists(path):
            shutil.rmtree(path)
        os.makedirs(os.path.join(path, 'blobs'))
        with open(os.path.join(path, 'version'), 'wb') as f:
            f.write(b'gpurr-trace 1\n')
        with open(os.path.join(path, 'header'), 'wb') as f:
            f.write(header if header is not None else header_bytes())
        self.ev = open(os.path.join(path, 'events'), 'wb')
        self.entries = []
        self.offset = 0

    def add_block(self, raw, first_seq, events, launches, frame=None, usize=None, level=3, t0=0, t1=0,
                  window_log=None):
        frame = frame if frame is not None else zframe(raw, level=level, window_log=window_log)
        usize = len(raw) if usize is None else usize
        h = block_header(len(frame), usize, first_seq, events, launches, t0, t1)
        self.ev.write(h)
        self.ev.write(frame)
        self.entries.append({'fileOffset': self.offset, 'firstSeq': first_seq, 'eventCount': events,
                             'launchCount': launches, 'firstTimeNs': t0, 'lastTimeNs': t1,
                             'compressedSize': len(frame), 'uncompressedSize': usize})
        self.offset += len(h) + len(frame)

    def close(self, index=True, checksums=True):
        self.ev.close()
        if index:
            with open(os.path.join(self.path, 'index'), 'wb') as f:
                f.write(S.Index.new_message(blocks=self.entries).to_bytes())
            if checksums:
                with open(os.path.join(self.path, 'checksums'), 'wb') as f:
                    f.write(otrace.checksums_text(self.path))
        return self.path


def alias_text_list(msg, count, target_index=0):
    """In a single-segment message `msg` (bytes, with its 8-byte segment
    table) find the List(Text) pointer whose list has `count` elements and
    make every element point at element `target_index`'s text."""
    w = list(struct.unpack('<%dQ' % (len(msg) // 8), msg))
    assert w[0] & 0xffffffff == 0, 'message must be single-segment'
    found = None
    for i in range(1, len(w)):
        x = w[i]
        if x & 3 == 1 and (x >> 32) & 7 == 6 and (x >> 35) == count:
            found = i
            break
    assert found is not None, 'list not found'
    off = (w[found] >> 2) & 0x3fffffff
    if off & 0x20000000:
        off -= 0x40000000
    start = found + 1 + off
    tp = w[start + target_index]
    toff = (tp >> 2) & 0x3fffffff
    if toff & 0x20000000:
        toff -= 0x40000000
    ttarget = start + target_index + 1 + toff
    for k in range(count):
        j = start + k
        o = ttarget - (j + 1)
        w[j] = ((o & 0x3fffffff) << 2) | 1 | (tp & 0xffffffff00000000)
    return struct.pack('<%dQ' % len(w), *w)


def templated(template, seqs, times=None):
    """Frames made from one template event frame (built with seq SEQ_T and
    timeNs TIME_T), patched with each seq (and time)."""
    a = template.find(struct.pack('<Q', SEQ_T))
    b = template.find(struct.pack('<Q', TIME_T))
    assert a > 0 and b > 0
    out = bytearray(template * len(seqs))
    n = len(template)
    for i, s in enumerate(seqs):
        struct.pack_into('<Q', out, i * n + a, s)
        struct.pack_into('<Q', out, i * n + b, s if times is None else times[i])
    return bytes(out)


def sync_template(pad=32):
    """A contextSynchronize event template with a `pad`-byte origin file name."""
    return frame_event({'seq': SEQ_T, 'timeNs': TIME_T, 'origin': {'file': 'B' * pad},
                        'sync': {'kind': 'contextSynchronize'}})


def zero_blob(trace_path, size, level=1):
    """Stores a blob of `size` zero bytes (raw encoding) in the trace's blob
    store, streaming (never holding it); returns its BlobRef dict."""
    h = xxhash.xxh3_128()
    chunk = bytes(1 << 24)
    left = size
    while left:
        n = min(left, len(chunk))
        h.update(chunk[:n] if n < len(chunk) else chunk)
        left -= n
    ident = '%032x' % h.intdigest()
    d = os.path.join(trace_path, 'blobs', ident[:2])
    os.makedirs(d, exist_ok=True)
    f = os.path.join(d, ident)
    if not os.path.exists(f):
        cctx = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=True)
        with open(f + '.part', 'wb') as out:
            with cctx.stream_writer(out, size=size, closefd=False) as w:
                left = size
                while left:
                    n = min(left, len(chunk))
                    w.write(chunk[:n] if n < len(chunk) else chunk)
                    left -= n
        os.rename(f + '.part', f)
    return {'idHigh': int(ident[:16], 16), 'idLow': int(ident[16:], 16), 'size': size, 'encoding': 'raw'}
