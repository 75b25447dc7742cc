//! SD3's three text encoders and their tokenizers, assembled as diffusers'
//! `StableDiffusion3Pipeline.encode_prompt` does, to fill the prompt-embedding cache.
//!
//! `text = [CLIP-L penultimate ⊕ CLIP-G penultimate, zero-padded (or cut) to T5's width ;
//! T5 states]` along the tokens (77 + L), `pooled = CLIP-L pooled ⊕ CLIP-G pooled`. The CLIP
//! encoder is ours; T5 is candle-transformers' `T5EncoderModel` (both checked against
//! transformers on `fixtures/sd3-text-tiny`).

mod clip;
mod tokenize;

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::t5::{Config as T5Config, T5EncoderModel};

pub use clip::{ClipTextConfig, ClipTextEncoder};
pub use tokenize::PromptTokenizer;

use crate::error::{file_err, Result};

/// CLIP's fixed prompt length.
pub const CLIP_TOKENS: usize = 77;

fn weights_vb(dir: &Path, dtype: DType, device: &Device) -> Result<VarBuilder<'static>> {
    let files = super::io::safetensors_files(dir, "model")?;
    // SAFETY: the files are memory-mapped read-only and not modified while the encoders live.
    unsafe { VarBuilder::from_mmaped_safetensors(&files, dtype, device) }
        .map_err(|e| file_err(dir, e))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| file_err(path, e))?;
    serde_json::from_str(&text).map_err(|e| file_err(path, e))
}

/// The text side of an SD3 pipeline folder: `text_encoder{,_2,_3}/` and `tokenizer{,_2,_3}/`.
pub struct Sd3TextEncoders {
    clip: [(PromptTokenizer, ClipTextEncoder); 2],
    t5: (PromptTokenizer, std::cell::RefCell<T5EncoderModel>),
    device: Device,
}

impl Sd3TextEncoders {
    /// Loads the three encoders (in `dtype`; f32 on the CPU) and tokenizers of the pipeline
    /// folder `dir`, offline.
    pub fn from_dir(dir: &Path, dtype: DType, device: &Device) -> Result<Self> {
        let clip = |enc: &str, tok: &str| -> Result<(PromptTokenizer, ClipTextEncoder)> {
            let d = dir.join(enc);
            let cfg: ClipTextConfig = read_json(&d.join("config.json"))?;
            let model = ClipTextEncoder::new(cfg, weights_vb(&d, dtype, device)?)
                .map_err(|e| file_err(&d, e))?;
            Ok((PromptTokenizer::clip(&dir.join(tok))?, model))
        };
        let t5_dir = dir.join("text_encoder_3");
        let t5_cfg: T5Config = read_json(&t5_dir.join("config.json"))?;
        let t5 = T5EncoderModel::load(weights_vb(&t5_dir, dtype, device)?, &t5_cfg)
            .map_err(|e| file_err(&t5_dir, e))?;
        Ok(Self {
            clip: [clip("text_encoder", "tokenizer")?, clip("text_encoder_2", "tokenizer_2")?],
            t5: (PromptTokenizer::t5(&dir.join("tokenizer_3"))?, std::cell::RefCell::new(t5)),
            device: device.clone(),
        })
    }

    fn ids(&self, tok: &PromptTokenizer, prompts: &[String], len: usize) -> Result<Tensor> {
        let mut flat = Vec::with_capacity(prompts.len() * len);
        for p in prompts {
            flat.extend(tok.encode(p, len)?);
        }
        Ok(Tensor::from_vec(flat, (prompts.len(), len), &self.device)?)
    }

    /// The token ids each encoder sees: `([B, 77], [B, 77], [B, max_sequence_length])`.
    pub fn token_ids(&self, prompts: &[String], max_sequence_length: usize) -> Result<[Tensor; 3]> {
        Ok([
            self.ids(&self.clip[0].0, prompts, CLIP_TOKENS)?,
            self.ids(&self.clip[1].0, prompts, CLIP_TOKENS)?,
            self.ids(&self.t5.0, prompts, max_sequence_length)?,
        ])
    }

    /// `(text[B, 77 + L, J], pooled[B, P])` of `prompts` in f32, as diffusers' `encode_prompt`
    /// (no CLIP skip, `L = max_sequence_length`).
    pub fn encode(
        &self,
        prompts: &[String],
        max_sequence_length: usize,
    ) -> Result<(Tensor, Tensor)> {
        let [l_ids, g_ids, t_ids] = self.token_ids(prompts, max_sequence_length)?;
        let (l_states, l_pooled) = self.clip[0].1.encode(&l_ids)?;
        let (g_states, g_pooled) = self.clip[1].1.encode(&g_ids)?;
        let t5 = self.t5.1.borrow_mut().forward(&t_ids)?.to_dtype(DType::F32)?;
        let clip =
            Tensor::cat(&[l_states.to_dtype(DType::F32)?, g_states.to_dtype(DType::F32)?], 2)?;
        let (w, j) = (clip.dim(2)?, t5.dim(2)?);
        let clip = if w <= j { clip.pad_with_zeros(2, 0, j - w)? } else { clip.narrow(2, 0, j)? };
        let text = Tensor::cat(&[clip, t5], 1)?;
        let pooled =
            Tensor::cat(&[l_pooled.to_dtype(DType::F32)?, g_pooled.to_dtype(DType::F32)?], 1)?;
        Ok((text, pooled))
    }
}

#[cfg(test)]
mod tests;
