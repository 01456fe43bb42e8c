"""The buffer hash of FORMAT.md section 8, vectorised over lanes and chunks."""
import numpy as np
import xxhash

M64 = (1 << 64) - 1
K0 = 0xa0761d6478bd642f
K1 = 0xe7037ed1a0b428db
K2 = 0x8ebc6af09c88c6e3
K3 = 0x589965cc75374cc3
CHUNK = 65536
LANES = 256

_U = np.uint64
_LO32 = _U(0xffffffff)


def _fmix_int(k):
    k ^= k >> 33
    k = (k * 0xff51afd7ed558ccd) & M64
    k ^= k >> 33
    k = (k * 0xc4ceb9fe1a85ec53) & M64
    k ^= k >> 33
    return k


def _mum_int(a, b):
    p = a * b
    return (p & M64) ^ (p >> 64)


def _rotl_int(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _step_int(s, lo, hi):
    return _mum_int(lo ^ K1 ^ s, hi ^ K2) ^ _rotl_int(s, 29)


def _fmix(k):
    k = k ^ (k >> _U(33))
    k = k * _U(0xff51afd7ed558ccd)
    k = k ^ (k >> _U(33))
    k = k * _U(0xc4ceb9fe1a85ec53)
    k = k ^ (k >> _U(33))
    return k


def _mum(a, b):
    a0, a1 = a & _LO32, a >> _U(32)
    b0, b1 = b & _LO32, b >> _U(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _U(32)) + (p01 & _LO32) + (p10 & _LO32)
    lo = (mid << _U(32)) | (p00 & _LO32)
    hi = p11 + (p01 >> _U(32)) + (p10 >> _U(32)) + (mid >> _U(32))
    return lo ^ hi


def _step(s, lo, hi):
    rot = (s << _U(29)) | (s >> _U(35))
    return _mum(lo ^ _U(K1) ^ s, hi ^ _U(K2)) ^ rot


def _chunks(data, indices, length):
    """Digests of equal-length chunks: data is (m, length) bytes, the chunks
    of those m indices."""
    m = data.shape[0]
    words = (length + 15) // 16
    padded = np.zeros((m, words * 16), dtype=np.uint8)
    padded[:, :length] = data
    w = padded.view('<u8').reshape(m, words, 2)
    c = np.asarray(indices, dtype=np.uint64)[:, None]
    lanes = _fmix(_U(K0) ^ (c * _U(LANES) + np.arange(LANES, dtype=np.uint64)[None, :]))
    for r in range(0, words, LANES):
        n = min(LANES, words - r)
        lanes[:, :n] = _step(lanes[:, :n], w[:, r:r + n, 0], w[:, r:r + n, 1])
    level = 0
    while lanes.shape[1] > 1:
        lanes = _step(lanes[:, 0::2], lanes[:, 1::2], np.full(1, (K3 + level) & M64, dtype=np.uint64))
        level += 1
    return [int(x) for x in _fmix(lanes[:, 0] ^ _U(length))]


# Chunk digests already computed, by (chunk index, bytes): a simulated run
# hashes the same bytes many times (a tensor read by several launches, the
# second run of a pair), and the vectorised hash is slow in numpy.
_KNOWN = {}
_KNOWN_MAX = 1 << 16


def _chunks_known(rows, first_chunk, length):
    """_chunks of rows, chunks first_chunk on, each digest computed once for
    the same index and bytes."""
    keys = [(first_chunk + i, length, xxhash.xxh3_128_digest(row)) for i, row in enumerate(rows)]
    digests = [_KNOWN.get(k) for k in keys]
    missing = [i for i, d in enumerate(digests) if d is None]
    if missing:
        if len(_KNOWN) + len(missing) > _KNOWN_MAX:
            _KNOWN.clear()
        for i, d in zip(missing, _chunks(rows[missing], [first_chunk + i for i in missing], length)):
            digests[i] = _KNOWN[keys[i]] = d
    return digests


def chunk_digests(buf, chunk_bytes=CHUNK):
    """Chunk digests of a buffer (bytes, bytearray or uint8 array)."""
    a = np.frombuffer(bytes(buf), dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf.astype(np.uint8, copy=False).reshape(-1)
    n = a.size
    full = n // chunk_bytes
    out = []
    with np.errstate(over='ignore'):
        if full:
            out += _chunks_known(a[:full * chunk_bytes].reshape(full, chunk_bytes), 0, chunk_bytes)
        if n % chunk_bytes:
            out += _chunks_known(a[full * chunk_bytes:].reshape(1, -1), full, n % chunk_bytes)
    return out


def fold(chunks, n):
    s = _fmix_int(K0 ^ n)
    for c, d in enumerate(chunks):
        s = _step_int(s, d, c)
    return _fmix_int(s)


def digest(buf, chunk_bytes=CHUNK):
    """The buffer digest of FORMAT.md section 8."""
    n = len(buf) if not isinstance(buf, np.ndarray) else buf.size
    return fold(chunk_digests(buf, chunk_bytes), n)


def pattern(n):
    i = np.arange(n, dtype=np.int64)
    return ((i * 31 + 7 + (i >> 8)) % 256).astype(np.uint8)
