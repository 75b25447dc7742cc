#!/usr/bin/env python3
"""The PyTorch peer of `drift bench decode_cache`: Fast-dLLM's own LLaDA decoders on the same
checkpoint, same prompt and settings, one JSON line per case with drift's keys.

    cargo run --release -- bench decode_cache          # writes runs/bench/llada-small-50m
    python3 benches/peer/decode_cache.py --fast-dllm PATH/TO/Fast-dLLM [--iters 3]

Needs torch, transformers (4.46 is what LLaDA's code expects) and einops, and a checkout of
NVlabs/Fast-dLLM (its `llada/` folder is imported, unchanged). Not run in CI. Both sides use
2 threads unless DRIFT_PEER_THREADS says otherwise.
"""

import argparse
import json
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast-dllm", required=True, help="a checkout of NVlabs/Fast-dLLM")
    ap.add_argument("--model", default="runs/bench/llada-small-50m")
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="the model's dtype: bf16 is Fast-dLLM's own setting "
                         "(torch_dtype=torch.bfloat16); on CPUs with AMX oneDNN runs its "
                         "matmuls on the tiles")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(int(os.environ.get("DRIFT_PEER_THREADS", "2")))
    sys.path.insert(0, os.path.join(args.fast_dllm, "llada"))
    import generate as G  # noqa: E402  (Fast-dLLM's llada/generate.py)
    from model.modeling_llada import LLaDAModelLM  # noqa: E402

    from model.configuration_llada import LLaDAConfig  # noqa: E402
    from safetensors.torch import load_file

    cfg = json.load(open(os.path.join(args.model, "config.json")))
    # drift's safetensors carry no `format` metadata, which from_pretrained insists on: build
    # the model from its config and load the tensors by name (strict: every name must match).
    model = LLaDAModelLM(LLaDAConfig.from_pretrained(args.model), init_params=False)
    model.load_state_dict(load_file(os.path.join(args.model, "model.safetensors")), strict=True)
    model = (model.bfloat16() if args.dtype == "bf16" else model.float()).eval()
    mask_id = cfg["mask_token_id"]
    # drift's bench prompt: 64 ids, 4 + (7i mod 90).
    prompt = torch.tensor([[4 + (i * 7) % 90 for i in range(64)]])
    params = sum(p.numel() for p in model.parameters())
    plain = None
    for name, fn in [("none", G.generate), ("prefix", G.generate_with_prefix_cache),
                     ("dual", G.generate_with_dual_cache)]:
        kw = dict(steps=128, gen_length=128, block_length=32, temperature=0.0,
                  remasking="low_confidence", mask_id=mask_id)
        with torch.no_grad():
            out = fn(model, prompt, **kw)  # warm-up (and torch.compile of the attention)
        nfe = out[1] if isinstance(out, tuple) else 128
        tokens = (out[0] if isinstance(out, tuple) else out)[0, 64:].tolist()
        times = []
        for _ in range(max(1, args.iters)):
            start = time.perf_counter()
            with torch.no_grad():
                fn(model, prompt, **kw)
            times.append(time.perf_counter() - start)
        secs = statistics.median(times)
        plain = plain or secs
        print(json.dumps({
            "case": "decode_cache", "peer": "Fast-dLLM 24cc59e (torch %s)" % torch.__version__,
            "params": params, "dtype": args.dtype, "kv_cache": name, "batch": 1, "prompt": 64, "gen": 128,
            "block": 32, "steps": 128, "forward_passes": int(nfe), "seconds": secs,
            "speedup_vs_no_cache": plain / secs, "threads": torch.get_num_threads(),
            "tokens": tokens,
        }), flush=True)


if __name__ == "__main__":
    main()
