#!/usr/bin/env python3
"""A reference scoring service for drift's HTTP reward (`drift_rewards::http::HttpReward`).

Protocol: POST a JSON body {"prompts": [text, ...], "images": [base64 PNG, ...]}; the answer
is {"scores": [number or null, ...], "components": {name: [number, ...]}, "errors": [...]}.

This server needs only the Python standard library. Its demo score is the mean brightness of
the image in [0, 1], with the mean of each channel as components; replace `score_image` with a
call to your own model (PickScore, an aesthetic predictor, an OCR or GenEval detector) and keep
the rest. An image that cannot be decoded gets a null score and its reason in "errors", so the
trainer records that one failure and goes on.

    python3 examples/reward_server/server.py --port 18085
    drift train flow --set 'rewards=[{name="http", weight=1.0,
        http={url="http://127.0.0.1:18085/score"}}]'

With --port 0 the system picks a free port; the first line printed is always
`listening on http://HOST:PORT/score`.
"""

import argparse
import base64
import json
import struct
import sys
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def decode_png(data):
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            up_left = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else up_left)
                line[i] = (line[i] + pred) & 255
            elif kind != 0:
                raise ValueError(f"bad filter type {kind}")
        rows.append(bytes(line) if bpp == 3 else bytes(b for j, b in enumerate(line) if j % 4 != 3))
        prev = line
    return width, height, rows


def score_image(prompt, width, height, rows):
    """The demo score: mean brightness in [0, 1]; components: the mean of each channel."""
    sums = [0, 0, 0]
    for row in rows:
        for c in range(3):
            sums[c] += sum(row[c::3])
    n = 255.0 * width * height
    red, green, blue = (s / n for s in sums)
    return (red + green + blue) / 3.0, {"red": red, "green": green, "blue": blue}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length))
            prompts, images = request["prompts"], request["images"]
            if len(prompts) != len(images):
                raise ValueError(f"{len(prompts)} prompts for {len(images)} images")
        except Exception as e:  # a malformed request is the client's error
            return self.reply(400, {"error": str(e)})
        scores, errors, components = [], [], {}
        for i, (prompt, image) in enumerate(zip(prompts, images)):
            try:
                width, height, rows = decode_png(base64.b64decode(image))
                score, parts = score_image(prompt, width, height, rows)
                scores.append(score)
                errors.append(None)
            except Exception as e:
                scores.append(None)
                errors.append(str(e))
                parts = {}
            for name in ("red", "green", "blue"):
                components.setdefault(name, []).append(parts.get(name, 0.0))
        self.reply(200, {"scores": scores, "components": components, "errors": errors})

    def reply(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18085)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}/score", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
