//! Stable Diffusion 3 / 3.5: the MMDiT transformer with LoRA adapters, loaded from a diffusers
//! folder, and the SD3 VAE decoder.

mod attention;
mod block;
mod config;
mod embed;
mod embeds;
mod io;
mod lora;
mod model;
mod policy;
pub mod text;
mod vae;
mod vae_decoder;

pub use config::{Sd3Config, Sd3TrainConfig};
pub use embed::{sincos_2d, unpatchify};
pub use embeds::{EmbeddedTask, PromptEmbeddings, EMBEDDINGS_FILE, PROMPTS_FILE};
pub use io::{
    read_sd3_config, read_sd3_weights, resolve_base, resolve_base_from_env, transformer_dir,
};
pub use lora::{LoraConfig, Proj, ProjLoader};
pub use model::Sd3Transformer;
pub use policy::{
    load_lora, load_sd3_lora_models, pack_cond, save_lora, sd3_lora_models, unpack_cond,
    Sd3LoraSetup, Sd3Policy, ADAPTER_CONFIG, ADAPTER_FILE,
};
pub use vae::{Sd3Vae, VaeConfig};
#[cfg(test)]
mod tests;
#[cfg(test)]
mod train_tests;
