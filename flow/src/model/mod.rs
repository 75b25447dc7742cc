//! The small conditional DiT for the shipped shapes world.

mod config;
mod dit;
mod embed;
mod io;
mod text;

pub use config::DitConfig;
pub use dit::Dit;
pub(crate) use dit::{modulate, norm};
pub use embed::{patchify, timestep_embedding, unpatchify};
pub use io::{load_dit_config, load_dit_frozen, load_dit_trainable, save_dit};
#[cfg(test)]
mod tests;
