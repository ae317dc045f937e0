"""Writes WebP tiles as libwebp (the library TileDB links) encodes them, and
what libwebp's WebPDecode{RGB,RGBA,BGR,BGRA} return for them, to pin tdb's
decoding of tiles tdb cannot write (lossy) or that libwebp writes in its own
way (opaque RGBA). Needs libwebp.so (1.2.4 was used). Run: python3 make.py
"""
import ctypes

lib = ctypes.CDLL("libwebp.so.7")
W, H = 16, 8


def pixels(channels):
    out = bytearray()
    for y in range(H):
        for x in range(W):
            px = [(x * 37 + y * 11) % 256, (x * x + 29 * y) % 256, ((x ^ y) * 16) % 256]
            if channels == 4:
                px.append(255 - 8 * x - 4 * y)
            out += bytes(px)
    return bytes(out)


def encode(fn, data, channels, *quality):
    out = ctypes.POINTER(ctypes.c_uint8)()
    args = [data, W, H, W * channels] + [ctypes.c_float(q) for q in quality]
    n = getattr(lib, fn)(*args, ctypes.byref(out))
    assert n > 0, fn
    b = ctypes.string_at(out, n)
    lib.WebPFree(out)
    return b


def decode(fn, webp, channels):
    w, h = ctypes.c_int(), ctypes.c_int()
    p = getattr(lib, fn)(webp, len(webp), ctypes.byref(w), ctypes.byref(h))
    assert p and (w.value, h.value) == (W, H), fn
    b = ctypes.string_at(p, W * H * channels)
    lib.WebPFree(ctypes.c_void_p(p))
    return b


lib.WebPDecodeRGB.restype = ctypes.c_void_p
lib.WebPDecodeRGBA.restype = ctypes.c_void_p
lib.WebPDecodeBGR.restype = ctypes.c_void_p
lib.WebPDecodeBGRA.restype = ctypes.c_void_p

cases = {
    # Lossy RGB: a plain VP8 file.
    "lossy_rgb": encode("WebPEncodeRGB", pixels(3), 3, 75.0),
    # Lossy RGBA: VP8X with an ALPH chunk.
    "lossy_rgba": encode("WebPEncodeRGBA", pixels(4), 4, 75.0),
    # Lossless RGBA, all opaque: libwebp marks alpha unused.
    "lossless_opaque_rgba": encode(
        "WebPEncodeLosslessRGBA", bytes(b if i % 4 != 3 else 255 for i, b in enumerate(pixels(4))), 4
    ),
}
for name, webp in cases.items():
    open(f"{name}.webp", "wb").write(webp)
    for fmt, ch in (("RGB", 3), ("RGBA", 4), ("BGR", 3), ("BGRA", 4)):
        open(f"{name}.{fmt.lower()}", "wb").write(decode(f"WebPDecode{fmt}", webp, ch))
