#!/usr/bin/env python3
"""Remakes the hand-built regression inputs of the reader fuzzer
(tests/fuzz/corpus/regress-*), each a hostile trace that once made the reader
misbehave. Needs the capnp and zstd command-line tools.

    tests/fuzz/make_regressions.py [CORPUS_DIR]

Input layout: see tests/fuzz/reader_fuzz.h (first byte = mode).
"""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, '..', '..', 'trace_format', 'trace.capnp')
BLOCK_MAGIC = 0x4b4c425252555047


def encode_frame(text):
    """A Frame message (trace.capnp) from Cap'n Proto text."""
    return subprocess.run(['capnp', 'encode', SCHEMA, 'Frame'], input=text.encode(),
                          stdout=subprocess.PIPE, check=True).stdout


def zstd(data):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'in')
        with open(src, 'wb') as f:
            f.write(data)
        subprocess.run(['zstd', '-q', '-19', '-f', src, '-o', src + '.zst'], check=True)
        with open(src + '.zst', 'rb') as f:
            return f.read()


def block_header(compressed, uncompressed, events, launches, first_seq=0):
    """The 64-byte block header: segment table, root pointer, 6 data words."""
    return struct.pack('<IIQQIIQIIQQ', 0, 7, 6 << 32, BLOCK_MAGIC, compressed, uncompressed,
                       first_seq, events, launches, 0, 0)


def amplified_list():
    """A launch whose `inputs` list claims 16 million empty elements: the
    list costs no bytes, so 1 KiB of compressed events once made the reader
    allocate 1.6 GB of RangeDigests. Padding (zeros) gives Cap'n Proto's
    traversal limit the room to accept the claim."""
    function = encode_frame('(function = (id = 0, module = 1, name = "k"))')
    launch = bytearray(encode_frame(
        '(event = (seq = 0, launch = (function = 0, '
        'inputs = [(address = 1, size = 2, digest = 3)])))'))
    # The inputs list pointer (inline composite, 7 words) and its tag word
    # (1 element of 5 data words and 2 pointers), as capnp lays them out.
    at_pointer = launch.index(bytes.fromhex('090000003f000000'))
    at_tag = launch.index(bytes.fromhex('0400000005000200'))
    launch[at_pointer + 4:at_pointer + 8] = struct.pack('<I', 7)        # 0 words
    launch[at_tag:at_tag + 8] = struct.pack('<II', 16_000_000 << 2, 0)  # empty elements
    words = 4 << 20
    launch[4:8] = struct.pack('<I', words)
    launch += bytes(8 * (words + 1) - len(launch))
    frames = function + bytes(launch)
    compressed = zstd(frames)
    events = block_header(len(compressed), len(frames), 1, 1) + compressed
    return bytes([2]) + events  # mode kEvents


def blob_claims_10gib():
    """A module load whose cubin is a 10 GiB blob, and that blob's file: a
    15-byte zstd frame whose header claims 10 GiB. The reader once allocated
    (and zeroed) 10 GiB before finding the frame empty."""
    frames = encode_frame(
        '(event = (seq = 0, module = (ordinal = 1, cubin = (idHigh = 0x4dec806e0cf87135, '
        'idLow = 0x7afe382b01544c94, size = 10737418240), arch = 90)))')
    block = struct.pack('<IIQQQ', 1, 0, 0, 0, 0) + frames
    lying = bytes([0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x00]) + struct.pack('<Q', 10 << 30) + bytes([1, 0, 0])

    def record(mode, payload):
        return bytes([mode]) + struct.pack('<H', len(payload)) + payload
    # Mode kSeveral: the block (kBlockFrames), then blob #0 (kBlobFile).
    return bytes([9]) + record(5, block) + record(4, bytes([0]) + lying)


def unknown_event_kind():
    """A block whose middle event is of a union member this gpurr does not
    know (Event's discriminant 11, as a newer gpurr would add): the reader
    once refused the whole trace as corrupt; it skips the event."""
    sync = bytearray(encode_frame(
        '(event = (seq = 1, timeNs = 2, thread = 1515870810, sync = (kind = streamSynchronize)))'))
    # Event's data section: seq, timeNs, thread (0x5a5a5a5a), then the union
    # discriminant (2 bytes).
    at = sync.index(struct.pack('<I', 1515870810)) + 4
    sync[at:at + 2] = struct.pack('<H', 11)
    frames = (encode_frame('(event = (seq = 0, alloc = (ordinal = 1, address = 4096, size = 64)))') +
              bytes(sync) +
              encode_frame('(event = (seq = 2, free = (ordinal = 1, address = 4096)))'))
    # Mode kBlockFrames: 3 events, no launch, first seq 0.
    return bytes([5]) + struct.pack('<IIQQQ', 3, 0, 0, 0, 0) + frames


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, 'corpus')
    inputs = {
        'regress-fifo-version': bytes([7, 5, 2]),  # `version` is a fifo (mode kOddEntry)
        'regress-amplified-list': amplified_list(),
        'regress-blob-claims-10gib': blob_claims_10gib(),
        'regress-unknown-event-kind': unknown_event_kind(),
    }
    for name, data in inputs.items():
        with open(os.path.join(corpus, name), 'wb') as f:
            f.write(data)
    print(f'wrote {len(inputs)} regression inputs to {corpus}')


if __name__ == '__main__':
    main()
