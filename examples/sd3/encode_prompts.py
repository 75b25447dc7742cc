#!/usr/bin/env python3
"""Fill drift's SD3 prompt-embedding cache with diffusers' own text encoders.

`drift train flow` trains an SD3 / SD3.5 folder with LoRA but does not run CLIP-L, CLIP-G
and T5-XXL itself: a Flow-GRPO run draws its prompts from a fixed set, so they are encoded
once, here, exactly as diffusers' `StableDiffusion3Pipeline.encode_prompt` encodes them, and
looked up by prompt text during the run.

    python3 examples/sd3/encode_prompts.py --model ~/models/sd3.5-medium \
        --prompts prompts.jsonl --out embeds/ [--max-sequence-length 128] [--device cuda]

`--prompts` is drift's JSONL prompt file (`{"prompt": ...}` per line; other fields are
ignored, so the file given as `prompts = FILE` to `drift train flow` works as is). The
output directory holds `prompts.jsonl` (line i = row i) and `embeddings.safetensors` with
`prompt_embeds [N, 77 + L, 4096]`, `pooled_prompt_embeds [N, 2048]` and the empty prompt's
`negative_prompt_embeds`, `negative_pooled_prompt_embeds` (CFG's unconditional branch, as
flow_grpo uses it). Then: `drift train flow --set base=MODEL --set sd3.embeddings=OUT ...`.

Needs torch, diffusers, transformers and safetensors (the environment flow_grpo users have);
it reads the model folder offline and downloads nothing.
"""

import argparse
import json
import os


def read_prompts(path):
    prompts, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                prompt = json.loads(line)["prompt"]
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"{path}: line {number}: expected {{\"prompt\": ...}} ({e})")
            if not isinstance(prompt, str):
                raise SystemExit(f"{path}: line {number}: \"prompt\" is not a string")
            if prompt not in seen:
                seen.add(prompt)
                prompts.append(prompt)
    if not prompts:
        raise SystemExit(f"{path}: no prompts")
    return prompts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a local diffusers SD3 / SD3.5 folder")
    ap.add_argument("--prompts", required=True, help="drift's JSONL prompt file")
    ap.add_argument("--out", required=True, help="the cache directory to write")
    ap.add_argument("--max-sequence-length", type=int, default=128,
                    help="T5 tokens per prompt (flow_grpo: 128; diffusers' default: 256)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    prompts = read_prompts(args.prompts)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from diffusers import StableDiffusion3Pipeline
    from safetensors.torch import save_file

    pipe = StableDiffusion3Pipeline.from_pretrained(
        args.model, transformer=None, vae=None, torch_dtype=torch.float32, local_files_only=True
    ).to(args.device)

    def encode(batch):
        with torch.no_grad():
            embeds, _, pooled, _ = pipe.encode_prompt(
                prompt=batch, prompt_2=batch, prompt_3=batch,
                do_classifier_free_guidance=False,
                max_sequence_length=args.max_sequence_length,
            )
        return embeds.float().cpu(), pooled.float().cpu()

    parts = [encode(prompts[i:i + args.batch]) for i in range(0, len(prompts), args.batch)]
    text = torch.cat([p[0] for p in parts]).contiguous()
    pooled = torch.cat([p[1] for p in parts]).contiguous()
    null_text, null_pooled = encode([""])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "prompts.jsonl"), "w", encoding="utf-8") as f:
        for p in prompts:
            f.write(json.dumps({"prompt": p}) + "\n")
    save_file(
        {
            "prompt_embeds": text,
            "pooled_prompt_embeds": pooled,
            "negative_prompt_embeds": null_text.contiguous(),
            "negative_pooled_prompt_embeds": null_pooled.contiguous(),
        },
        os.path.join(args.out, "embeddings.safetensors"),
    )
    print(f"{len(prompts)} prompts -> {args.out} (text {tuple(text.shape)}, pooled {tuple(pooled.shape)})")


if __name__ == "__main__":
    main()
