//! drift-dllm: masked diffusion language models, likelihood estimators and dLLM RL recipes.
