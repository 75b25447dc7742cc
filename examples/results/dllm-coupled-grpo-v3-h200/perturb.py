# Adds random-sign perturbations of size eps to every f32 weight of a safetensors file
# (what a few sign-like Adam steps of lr eps/k do to a model whose gradient carries no signal).
import json, struct, sys, random, array, shutil, os
src, dst, eps, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
os.makedirs(dst, exist_ok=True)
for f in os.listdir(src):
    if f != "model.safetensors":
        p = os.path.join(src, f)
        if os.path.isfile(p): shutil.copy(p, dst)
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); body = bytearray(raw[8 + n:])
rng = random.Random(seed)
for k, v in hdr.items():
    if k == "__metadata__" or v["dtype"] != "F32": continue
    a, b = v["data_offsets"]
    arr = array.array("f"); arr.frombytes(bytes(body[a:b]))
    for i in range(len(arr)):
        arr[i] += eps if rng.random() < 0.5 else -eps
    body[a:b] = arr.tobytes()
open(os.path.join(dst, "model.safetensors"), "wb").write(raw[:8 + n] + bytes(body))
