//! Helpers shared by the integration tests: fixture paths and tensor comparisons.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use candle_core::{Device, Tensor};

/// A folder of the repository's `fixtures/` (reference outputs of the original Python code).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures")).join(name)
}

/// The tensors of `fixtures/<name>/cases.safetensors`.
pub fn cases(name: &str) -> HashMap<String, Tensor> {
    candle_core::safetensors::load(fixture(name).join("cases.safetensors"), &Device::Cpu)
        .expect("fixture cases.safetensors must load")
}

/// `max |a − b|` over all elements.
pub fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims(), "compared tensors differ in shape");
    a.sub(b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar().unwrap()
}
